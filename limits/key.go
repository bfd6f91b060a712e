package limits

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// NormalizeKey returns value in the form a dispatcher compares with a running job's key text, for a
// kind whose key columns are cols. A one-column key is taken as it is. A key of several columns must
// be a JSON array with one scalar per column; it is printed the way PostgreSQL's json_build_array
// prints one: ", " between elements, strings escaped as PostgreSQL escapes them, numbers as written
// (so write them as PostgreSQL prints the column: 42 for a bigint, not 42.0).
func NormalizeKey(cols []string, value string) (string, error) {
	return normalizeKey("", cols, value)
}

// normalizeKey is NormalizeKey naming kind, when not "", in its errors.
func normalizeKey(kind string, cols []string, value string) (string, error) {
	what := fmt.Sprintf("key %q", value)
	if kind != "" {
		what += fmt.Sprintf(" for kind %q", kind)
	}
	switch len(cols) {
	case 0:
		return "", fmt.Errorf("%w %s: the kind has no key, so it has no per-key limits", ErrInvalid, what)
	case 1:
		return value, nil
	}
	want := fmt.Sprintf("the key has %d columns (%s), so give a JSON array of their values, for example %s",
		len(cols), strings.Join(cols, ", "), example(len(cols)))
	// json.Valid first: a Decoder would accept trailing text after the array ("[1, 2] ]").
	if !json.Valid([]byte(value)) {
		return "", fmt.Errorf("%w %s: not JSON: %s", ErrInvalid, what, want)
	}
	dec := json.NewDecoder(strings.NewReader(value))
	dec.UseNumber() // keep numbers as written: 1e3 and 1000 are different key texts
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("%w %s: %s", ErrInvalid, what, want)
	}
	elems, ok := v.([]any)
	if !ok {
		return "", fmt.Errorf("%w %s: %s, not an array: %s", ErrInvalid, what, describe(v), want)
	}
	if len(elems) != len(cols) {
		return "", fmt.Errorf("%w %s: %d values for the %d key columns (%s)", ErrInvalid, what, len(elems), len(cols), strings.Join(cols, ", "))
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, e := range elems {
		if i > 0 {
			b.WriteString(", ")
		}
		switch e := e.(type) {
		case string:
			writeJSONString(&b, e)
		case json.Number:
			b.WriteString(e.String())
		case bool:
			b.WriteString(strconv.FormatBool(e))
		default:
			return "", fmt.Errorf("%w %s: value %d (column %s) is %s; key columns hold scalars (string, number, boolean), never null",
				ErrInvalid, what, i+1, cols[i], describe(e))
		}
	}
	b.WriteByte(']')
	return b.String(), nil
}

// writeJSONString writes s as PostgreSQL's escape_json does: quotes, backslashes and control
// characters escaped, everything else as it is.
func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// describe names the JSON type of v, as encoding/json decodes it with UseNumber.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

func example(n int) string {
	parts := []string{`"acme"`, "42", "true"}
	for len(parts) < n {
		parts = append(parts, `"x"`)
	}
	return "[" + strings.Join(parts[:n], ", ") + "]"
}
