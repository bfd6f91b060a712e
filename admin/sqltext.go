package admin

import (
	"github.com/jobpipe/jobpipe/internal/kindsql"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// The statements over a kind's table are package internal/kindsql's. Every identifier in them comes
// from the registry or the catalog and goes through pgx.Identifier; the caller's input only ever
// travels as parameters.

// statements renders the kind's statements; a Kind is read afresh for each request, so they are not
// kept.
func (k *Kind) statements() kindsql.Admin {
	cols := make([]string, len(k.Columns))
	for i, c := range k.Columns {
		cols[i] = c.Name
	}
	return kindsql.ForAdmin(k.Info, cols, retryBatch)
}

// stateCond is the condition that the row aliased alias is in state s.
func stateCond(alias string, s jobinfo.State) string {
	return "(" + s.Condition(alias) + ")"
}

// keyText is the key text of the row aliased alias (empty for kinds without key), as limits and locks
// name keys.
func keyText(k *Kind, alias string) string {
	if len(k.Info.Key) == 0 {
		return "''"
	}
	return k.Info.KeyText(alias)
}
