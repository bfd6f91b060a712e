package jobinfo

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// hostileNames are names a person or an attacker may give for a kind, table or column: SQL
// injection, quotes, unicode, case, dots, NUL, and lengths around the limit.
var hostileNames = []string{
	"webhook_delivery", "_x1", "a", strings.Repeat("a", MaxNameLength), strings.Repeat("a", MaxNameLength+1),
	strings.Repeat("b", 64), "", `x"; DROP TABLE y; --`, "x'; DROP TABLE y; --", `a"b`, "Webhook", "1abc",
	"a.b", "jöb", "ジョブ", "a\x00b", "a b", "a-b", "select", "id", "lock_token",
}

// validNameOracle says, byte by byte, whether ValidateName must accept name.
func validNameOracle(name string) bool {
	if name == "" || len(name) > MaxNameLength || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// FuzzValidateName checks ValidateName against a byte-by-byte oracle. An accepted name needs no
// quoting: pgx.Identifier quotes it as "name" with nothing escaped or dropped, and the name is what
// PostgreSQL folds it to unquoted. A refused name gets an error that names it, quoted, and says what
// is allowed.
func FuzzValidateName(f *testing.F) {
	for _, n := range hostileNames {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateName("column", name)
		if want := validNameOracle(name); (err == nil) != want {
			t.Fatalf("ValidateName(%q) = %v; want valid = %v", name, err, want)
		}
		if err == nil {
			if got, want := (pgx.Identifier{name}).Sanitize(), `"`+name+`"`; got != want || ident(name) != want {
				t.Fatalf("%q sanitises to %s (ident %s); want %s", name, got, ident(name), want)
			}
			if strings.ToLower(name) != name || snakeCase(name) != name {
				t.Fatalf("valid name %q is not its own lower-case, snake-case form", name)
			}
			return
		}
		msg := err.Error()
		switch {
		case name == "":
			if msg != "jobinfo: column name is empty: use lower-case letters, digits and underscores" {
				t.Fatalf("ValidateName(%q) = %q", name, msg)
			}
		case !strings.HasPrefix(msg, fmt.Sprintf("jobinfo: column name %q ", name)):
			t.Fatalf("ValidateName(%q) = %q; want it to name the name, quoted", name, msg)
		case !strings.Contains(msg, "lower-case letters, digits and underscores") && !strings.Contains(msg, "the limit is 48"):
			t.Fatalf("ValidateName(%q) = %q; want it to say what is allowed", name, msg)
		}
	})
}

// FuzzTableName checks the Table option: "table" or "schema.table", each part a valid name. An
// accepted name becomes the pgx.Identifier of its parts, which sanitises to the quoted parts joined
// by a dot and prints back as the name given; a refused one names the part that is wrong.
func FuzzTableName(f *testing.F) {
	for _, n := range hostileNames {
		f.Add(n)
		f.Add("billing." + n)
		f.Add(n + ".deliveries")
	}
	f.Add("a.b.c")
	f.Add(".x")
	f.Fuzz(func(t *testing.T, name string) {
		var info Info
		err := Table(name)(&info)
		parts := strings.SplitN(name, ".", 2)
		want := true
		for _, p := range parts {
			want = want && validNameOracle(p)
		}
		if (err == nil) != want {
			t.Fatalf("Table(%q) = %v; want valid = %v", name, err, want)
		}
		if err != nil {
			var named bool
			for _, p := range parts {
				named = named || (p == "" && strings.Contains(err.Error(), "name is empty")) ||
					strings.Contains(err.Error(), fmt.Sprintf("%q", p))
			}
			if !named {
				t.Fatalf("Table(%q) = %q; want it to name the bad part", name, err)
			}
			return
		}
		quoted := make([]string, len(parts))
		for i, p := range parts {
			quoted[i] = `"` + p + `"`
		}
		if got := info.Table.Sanitize(); got != strings.Join(quoted, ".") || got != pgx.Identifier(parts).Sanitize() {
			t.Fatalf("Table(%q) sanitises to %s; want %s", name, got, strings.Join(quoted, "."))
		}
		if tableString(info.Table) != name {
			t.Fatalf("Table(%q) prints back as %q", name, tableString(info.Table))
		}
	})
}

// FuzzParseColumnType checks that a column type is refused unless it is one of a closed list (which
// is what reaches DDL) with modifiers PostgreSQL takes (varchar(n): n >= 1; numeric(p,s): p from 1
// to 1000, s at most 1000), that the canonical spelling is a fixed point, and that a refusal names
// the type given.
func FuzzParseColumnType(f *testing.F) {
	for _, s := range []string{"text", "INT", "Double  Precision", "varchar(200)", "numeric(10, 2)", "text[]",
		"varchar(1,2)", "numeric(99999)", "text; drop table x", "serial", "", "numeric ( 5 )", "int\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ddl, err := ParseColumnType(s)
		if err != nil {
			if ddl != "" || !strings.Contains(err.Error(), fmt.Sprintf("column type %q", s)) {
				t.Fatalf("ParseColumnType(%q) = %q, %v; want an error naming the type", s, ddl, err)
			}
			return
		}
		if m := paramTypePattern.FindStringSubmatch(ddl); m != nil {
			n, _ := strconv.Atoi(m[2])
			scale, _ := strconv.Atoi(cmp.Or(m[4], "0"))
			if n < 1 || m[1] == "numeric" && (n > 1000 || scale > 1000) {
				t.Fatalf("ParseColumnType(%q) = %q, which PostgreSQL refuses", s, ddl)
			}
		}
		known := paramTypePattern.MatchString(ddl)
		for _, typ := range simpleTypes {
			known = known || typ.ddl == ddl
		}
		if !known {
			t.Fatalf("ParseColumnType(%q) = %q, which is not in the closed list", s, ddl)
		}
		if again, err := ParseColumnType(ddl); err != nil || again != ddl {
			t.Fatalf("ParseColumnType(%q) = %q, which parses again as %q, %v", s, ddl, again, err)
		}
	})
}

// FuzzTableSpec builds a kind's table as `jobpipe kind new` does, from a kind name, a table name,
// columns ("name:type[:null]" separated by ";") and unique and key columns (comma-separated). A spec
// Validate refuses yields no statements; an accepted one yields statements in which every table and
// column name appears only as pgx.Identifier quotes it, and none of which can end early (no ";").
func FuzzTableSpec(f *testing.F) {
	f.Add("delivery", "", "customer_id:bigint;url:text;payload:jsonb:null", "customer_id", "", "created")
	f.Add("delivery", "billing.deliveries", "a:varchar(20);b:numeric(10,2)", "a,b", "a", "process_after")
	f.Add(`x"; DROP TABLE y; --`, "", "id2:bigint", "", "", "")
	f.Add("k", `t"; DROP TABLE y; --`, `c"; DROP TABLE y; --:text`, "", "", "")
	f.Add("k", "", "c:text; DROP TABLE y", "", "", "")
	f.Add("k", "", "c:text:null", "c", "c", "")
	f.Add("k", "", "id:bigint;c:text;c:int", "d", "c,c", "sideways")
	f.Fuzz(func(t *testing.T, kind, table, columns, unique, key, order string) {
		spec := TableSpec{Kind: kind, Table: table, Unique: splitComma(unique), Key: splitComma(key), Order: Order(order)}
		for _, c := range strings.Split(columns, ";") {
			name, typ, _ := strings.Cut(c, ":")
			col := Column{Name: name, Type: typ}
			if t, ok := strings.CutSuffix(typ, ":null"); ok {
				col.Type, col.Nullable = t, true
			}
			spec.Columns = append(spec.Columns, col)
		}
		stmts, err := spec.CreateStatements()
		if verr := spec.Validate(); (err == nil) != (verr == nil) {
			t.Fatalf("CreateStatements error %v, Validate error %v", err, verr)
		}
		if err != nil {
			if stmts != nil || !strings.HasPrefix(err.Error(), "jobinfo: ") {
				t.Fatalf("CreateStatements(%+v) = %d statements, %v", spec, len(stmts), err)
			}
			return
		}
		tbl := spec.identifier().Sanitize()
		if !strings.HasPrefix(stmts[0], "CREATE TABLE "+tbl+" (\n") {
			t.Fatalf("first statement %q does not create %s", stmts[0], tbl)
		}
		for _, c := range spec.Columns {
			if !strings.Contains(stmts[0], "\n    "+(pgx.Identifier{c.Name}).Sanitize()+" ") {
				t.Fatalf("column %q is not created as %s: %s", c.Name, pgx.Identifier{c.Name}.Sanitize(), stmts[0])
			}
		}
		for _, s := range stmts {
			if strings.Contains(s, ";") {
				t.Fatalf("statement contains ';': %s", s)
			}
		}
	})
}

// splitComma splits "a,b" into its parts; "" gives none.
func splitComma(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
