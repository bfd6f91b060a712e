// Package kindsql writes the statements over a kind's table: the inserts, the dispatcher's claims,
// finishes, rescue and counts, the heads pass of keyed kinds, prune's deletes, the operators' reads
// and actions (package admin) and the bench's alternatives. Each is a
// named template with named fields, rendered once per kind from sanitised identifiers; the state
// conditions come from package internal/states. A change to a pipeline column or a state is made
// here, and TestStatementsExplain checks every statement against a real table.
package kindsql

import (
	"fmt"
	"strings"
	"text/template"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/states"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// funcs are the state conditions, by alias, as templates call them: {{waiting "t"}}.
var funcs = template.FuncMap{
	"waiting":      states.Waiting,
	"running":      states.Running,
	"leased":       states.Leased,
	"stillRunning": states.StillRunning,
	"notRunning":   states.NotRunning,
	"notFinished":  states.NotFinished,
	"neverRan":     states.NeverRan,
	"processed":    states.Processed,
	"failed":       states.Failed,
	// The states by name, and admin's pieces over them.
	"state":     state,
	"stateCase": stateCase,
	"dueAt":     dueAt,
}

// parse parses the statements of one file as templates named by their keys, sharing funcs.
func parse(set *template.Template, texts map[string]string) *template.Template {
	for name, text := range texts {
		template.Must(set.New(name).Parse(text))
	}
	return set
}

// statements holds every template of the package.
var statements = template.New("kindsql").Funcs(funcs)

// render executes the template name over data. The templates are fixed and their data built here, so
// an error is a bug of this package, which its tests find.
func render(name string, data any) string {
	var b strings.Builder
	if err := statements.ExecuteTemplate(&b, name, data); err != nil {
		panic(fmt.Sprintf("kindsql: rendering %s: %v", name, err))
	}
	return b.String()
}

// kind is what the templates know of a kind: its sanitised identifiers, and the pieces of SQL that
// depend on its key, unique fields and order, by the alias of its table in the statement.
type kind struct {
	info *jobinfo.Info
	// Table is the kind's table, sanitised (schema-qualified when configured).
	Table string
	// Name is the kind's name as a string literal.
	Name string
	// Keyed is whether the kind has a concurrency key; Unique, whether it has until-executed unique
	// fields.
	Keyed, Unique     bool
	data, key, unique []string
}

func newKind(info *jobinfo.Info) *kind {
	return &kind{info: info, Table: info.Table.Sanitize(), Name: quote(info.Name),
		Keyed: len(info.Key) > 0, Unique: len(info.Unique) > 0,
		data: sanitized(info.Columns()), key: sanitized(info.Key), unique: sanitized(info.Unique)}
}

// Order is the kind's order over the row aliased a, as ORDER BY lists it.
func (k *kind) Order(a string) string {
	if k.info.Order == jobinfo.OrderProcessAfter {
		return fmt.Sprintf("COALESCE(%[1]s.process_after, %[1]s.created_at), %[1]s.id", a)
	}
	return a + ".id"
}

// Due is the condition that the row aliased a is due. Under process_after order it is written over the
// order's expression, so that the ready index serves it.
func (k *kind) Due(a string) string {
	if k.info.Order == jobinfo.OrderProcessAfter {
		return fmt.Sprintf("COALESCE(%[1]s.process_after, %[1]s.created_at) <= now()", a)
	}
	return fmt.Sprintf("(%[1]s.process_after IS NULL OR %[1]s.process_after <= now())", a)
}

// Columns lists the data columns, named through alias a ("" for none).
func (k *kind) Columns(a string) string { return list(a, k.data) }

// KeyCols lists the key columns, named through alias a ("" for none).
func (k *kind) KeyCols(a string) string { return list(a, k.key) }

// UniqueCols lists the unique columns.
func (k *kind) UniqueCols() string { return list("", k.unique) }

// KeyText is the key of the row aliased a as text, as limits and locks name keys.
func (k *kind) KeyText(a string) string { return k.info.KeyText(a) }

// KeySlots selects, as slots, the slots held by the running jobs of the key of the row aliased a
// (an empty array when it runs none): what the heads pass and BusySlots read for each key.
func (k *kind) KeySlots(a string) string {
	return fmt.Sprintf("SELECT coalesce(array_agg(e.lock_slot), '{}') AS slots FROM %s e WHERE %s AND %s",
		k.Table, k.SameKey("e", a), states.Running("e"))
}

// SameKey is the condition that rows a and b have the same key.
func (k *kind) SameKey(a, b string) string {
	same := make([]string, len(k.key))
	for i, c := range k.key {
		same[i] = fmt.Sprintf("%s.%s = %s.%s", a, c, b, c)
	}
	return strings.Join(same, " AND ")
}

// InKey is the condition that row a has row b's key, for the lookups of one key's waiting jobs in
// the key-ready index (ordered by KeyOrder). It is written as a range over the key columns, not as
// equality: with statistics from a table that held one key, PostgreSQL takes key equality to match
// every row, and would walk the ready index or the primary key in the kind's order with the key as
// a filter, reading every other key's jobs. Only an index led by the key serves the range in
// KeyOrder.
func (k *kind) InKey(a, b string) string {
	ka, kb := "("+list(a, k.key)+")", "("+list(b, k.key)+")"
	return fmt.Sprintf("%s >= %s AND %s <= %s", ka, kb, ka, kb)
}

// KeyOrder is the order of the row aliased a within its key, led by the key columns: the key-ready
// index's order (see InKey).
func (k *kind) KeyOrder(a string) string { return list(a, k.key) + ", " + k.Order(a) }

// SameUnique is the condition that rows a and b have equal unique fields, NULLs equal as in the
// until-executed unique index.
func (k *kind) SameUnique(a, b string) string {
	same := make([]string, len(k.unique))
	for i, c := range k.unique {
		same[i] = fmt.Sprintf("%s.%s IS NOT DISTINCT FROM %s.%s", a, c, b, c)
	}
	return strings.Join(same, " AND ")
}

func list(a string, cols []string) string {
	if a == "" {
		return strings.Join(cols, ", ")
	}
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = a + "." + c
	}
	return strings.Join(out, ", ")
}

func sanitized(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = pgx.Identifier{n}.Sanitize()
	}
	return out
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
