package jobinfo

import (
	"fmt"
	"regexp"
	"strings"
)

// MaxNameLength is the longest kind, table or column name jobinfo accepts. PostgreSQL truncates
// identifiers at 63 bytes; the margin leaves room for the index names derived from a table's name.
const MaxNameLength = 48

var namePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// ValidateName reports whether name is usable as a kind, table or column name: lower-case ASCII letters,
// digits and underscores, starting with a letter or underscore, at most MaxNameLength bytes. what names
// the thing being checked ("kind", "column", ...) for the error message.
//
// The rule is deliberately narrower than what PostgreSQL accepts with quoting: names that need quoting are
// a source of bugs in hand-written SQL, and a hostile name is refused before anything is written.
func ValidateName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("jobinfo: %s name is empty: use lower-case letters, digits and underscores", what)
	case len(name) > MaxNameLength:
		return fmt.Errorf("jobinfo: %s name %q is %d bytes long: the limit is %d", what, name, len(name), MaxNameLength)
	case !namePattern.MatchString(name):
		return fmt.Errorf("jobinfo: %s name %q is not allowed: use lower-case letters, digits and underscores, starting with a letter or underscore", what, name)
	}
	return nil
}

// splitTableName splits "schema.table" or "table" and validates both parts.
func splitTableName(name string) (schema, table string, err error) {
	schema, table, qualified := strings.Cut(name, ".")
	if !qualified {
		schema, table = "", name
	} else if err := ValidateName("schema", schema); err != nil {
		return "", "", err
	}
	if err := ValidateName("table", table); err != nil {
		return "", "", err
	}
	return schema, table, nil
}

// snakeCase turns a Go field name into the column name used when a field has no tag:
// "CustomerID" -> "customer_id", "HTTPStatus" -> "http_status".
func snakeCase(name string) string {
	var b strings.Builder
	runes := []rune(name)
	for i, r := range runes {
		upper := r >= 'A' && r <= 'Z'
		if upper && i > 0 {
			prevLower := runes[i-1] >= 'a' && runes[i-1] <= 'z' || runes[i-1] >= '0' && runes[i-1] <= '9'
			nextLower := i+1 < len(runes) && runes[i+1] >= 'a' && runes[i+1] <= 'z'
			prevUpper := runes[i-1] >= 'A' && runes[i-1] <= 'Z'
			if prevLower || (prevUpper && nextLower) {
				b.WriteByte('_')
			}
		}
		if upper {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
