package uniqueness

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// FuzzInserter builds a kind's insert statements from any names, as package admin does from the
// registry and the catalog, where names were never checked by jobinfo.ValidateName (a table created
// by hand may be called anything). Whatever the names, each statement has the shape it has for plain
// names: the names appear only inside quoted identifiers (the kind's inside the notification's string
// literal) and decode back to themselves, so no name can change what a statement does. The unique
// columns are the conflict target, in order. The strategy given by name parses back to itself.
func FuzzInserter(f *testing.F) {
	f.Add("delivery", "deliveries", "customer_id,event_id,payload", uint8(0b011), "skip")
	f.Add("hostile", `we"ird table`, `select,a"b,Mixed Case,d`, uint8(0b001), "replace")
	f.Add(`x'; DROP TABLE y; --`, `x"; DROP TABLE y; --`, `c"; DROP TABLE y; --,d`, uint8(0b10), "replace-schedule")
	f.Add("k", "t", `a''b,"",\`, uint8(0xff), "error")
	f.Add("k", "t", "a", uint8(0), "merge")
	f.Fuzz(func(t *testing.T, kind, table, columns string, uniqueMask uint8, strategy string) {
		s, err := ParseStrategy(strategy)
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("strategy %q is unknown", strategy)) {
				t.Fatalf("ParseStrategy(%q) = %v; want an error naming it", strategy, err)
			}
			s = Replace
		} else if s.String() != strategy {
			t.Fatalf("ParseStrategy(%q) = %v", strategy, s)
		}
		if strings.ContainsRune(kind+table+columns, 0) {
			return // PostgreSQL names and text never hold NUL
		}
		cols := strings.Split(columns, ",")
		names := map[string]string{"kind": kind, "table": table}
		plain := &jobinfo.Info{Name: "kind", Table: pgx.Identifier{"table"}}
		hostile := &jobinfo.Info{Name: kind, Table: pgx.Identifier{table}}
		for i, c := range cols {
			if _, dup := names[c]; dup || slicesIndex(cols[:i], c) >= 0 {
				return // names must differ from each other for the mapping below
			}
			p := fmt.Sprintf("col%d", i)
			names[p] = c
			plain.Fields = append(plain.Fields, jobinfo.Field{Column: p})
			hostile.Fields = append(hostile.Fields, jobinfo.Field{Column: c})
			if uniqueMask&(1<<(i%8)) != 0 {
				plain.Unique, hostile.Unique = append(plain.Unique, p), append(hostile.Unique, c)
			}
		}
		want, got := New(plain).SQL(s), New(hostile).SQL(s)
		wantShape, wantIdents, wantLits := sqlShape(t, want)
		gotShape, gotIdents, gotLits := sqlShape(t, got)
		if gotShape != wantShape {
			t.Fatalf("the statement's shape changed with the names:\n got %s\nwant %s", gotShape, wantShape)
		}
		for i, id := range wantIdents {
			if mapped, ok := names[id]; ok {
				wantIdents[i] = mapped
			}
		}
		if !reflect.DeepEqual(gotIdents, wantIdents) {
			t.Fatalf("identifiers %q; want %q", gotIdents, wantIdents)
		}
		if len(gotLits) != 2 || gotLits[0] != NotifyChannel || gotLits[1] != kind || wantLits[1] != "kind" {
			t.Fatalf("string literals %q; want the channel and the kind %q", gotLits, kind)
		}
	})
}

// sqlShape splits a statement into its quoted identifiers, its string literals, and its shape: the
// statement with each identifier replaced by "I" and each literal by 'L'.
func sqlShape(t *testing.T, sql string) (shape string, idents, lits []string) {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(sql); i++ {
		q := sql[i]
		if q != '"' && q != '\'' {
			b.WriteByte(q)
			continue
		}
		var tok strings.Builder
		for i++; ; i++ {
			if i >= len(sql) {
				t.Fatalf("unterminated %c in %s", q, sql)
			}
			if sql[i] == q {
				if i+1 < len(sql) && sql[i+1] == q {
					tok.WriteByte(q)
					i++
					continue
				}
				break
			}
			tok.WriteByte(sql[i])
		}
		if q == '"' {
			idents = append(idents, tok.String())
			b.WriteString(`"I"`)
		} else {
			lits = append(lits, tok.String())
			b.WriteString(`'L'`)
		}
	}
	return b.String(), idents, lits
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
