package admin

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/states"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// Pieces of the statements over a kind's table. Every identifier in them comes from the registry or
// the catalog and goes through pgx.Identifier; the caller's input only ever travels as parameters.

// stateCond is the condition that the row aliased alias is in state s.
func stateCond(alias string, s jobinfo.State) string {
	return "(" + s.Condition(alias) + ")"
}

// stateCase is an expression giving the state of the row aliased alias, by jobinfo's conditions.
func stateCase(alias string) string {
	var b strings.Builder
	b.WriteString("CASE")
	for _, s := range jobinfo.States {
		fmt.Fprintf(&b, " WHEN %s THEN '%s'", stateCond(alias, s), s)
	}
	b.WriteString(" END")
	return b.String()
}

// dueCond is the condition that the waiting row aliased alias is due: process_after NULL means now, and
// a row's created_at is never later than now.
func dueCond(alias string) string {
	return fmt.Sprintf("COALESCE(%[1]s.process_after, %[1]s.created_at) <= now()", alias)
}

// dataJSON is an expression giving the data columns of the row aliased alias as one JSON object, in
// table order. row_to_json over a sub-select keeps that order and, unlike json_build_object, has no
// limit of 100 arguments; d.* rather than d, because a column may be named d.
func dataJSON(k *Kind, alias string) string {
	if len(k.Columns) == 0 {
		return "'{}'::json"
	}
	cols := make([]string, len(k.Columns))
	for i, c := range k.Columns {
		cols[i] = alias + "." + ident(c.Name)
	}
	return "(SELECT row_to_json(d.*) FROM (SELECT " + strings.Join(cols, ", ") + ") d)"
}

// keyText is the key text of the row aliased alias (empty for kinds without key), as limits and locks
// name keys.
func keyText(k *Kind, alias string) string {
	if len(k.Info.Key) == 0 {
		return "''"
	}
	return k.Info.KeyText(alias)
}

// sameUnique is the condition that rows a and b have equal unique fields, NULLs equal as in the
// until-executed unique index (NULLS NOT DISTINCT).
func sameUnique(k *Kind, a, b string) string {
	same := make([]string, len(k.Info.Unique))
	for i, c := range k.Info.Unique {
		same[i] = fmt.Sprintf("%[1]s.%[3]s IS NOT DISTINCT FROM %[2]s.%[3]s", a, b, ident(c))
	}
	return strings.Join(same, " AND ")
}

// neverStarted is the predicate of the until-executed unique index over the row aliased alias.
func neverStarted(alias string) string {
	return "(" + states.NeverRan(alias) + ")"
}

func table(k *Kind) string { return k.Info.Table.Sanitize() }

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }
