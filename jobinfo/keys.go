package jobinfo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/states"
)

// A kind's unique fields and concurrency key live in three places: the struct's tags, the table's
// indexes and the kind's row in jobpipe_kinds. Enqueue and the claims rely on all three agreeing, so
// Check compares them and names both sides of any difference.

type dbIndex struct {
	name             string
	columns          []string
	pred             string
	nullsNotDistinct bool
}

func (i *Info) indexProblems(idx []dbIndex) []string {
	return append(i.uniqueProblems(idx), i.keyProblems(idx)...)
}

// uniqueProblems compares the table's until-executed unique indexes with the struct's unique fields.
func (i *Info) uniqueProblems(idx []dbIndex) []string {
	var problems []string
	found := false
	for _, x := range idx {
		switch {
		case x.pred != states.NeverRanDeparsed():
		case sameColumns(x.columns, i.Unique):
			found = found || x.nullsNotDistinct
		default:
			problems = append(problems, i.uniqueIndexProblem(x))
		}
	}
	// An index over other columns was reported with its fix: "missing" would suggest a second one.
	if len(i.Unique) > 0 && !found && len(problems) == 0 {
		problems = append(problems, fmt.Sprintf(
			"the until-executed unique index is missing: CREATE UNIQUE INDEX ON %s (%s) NULLS NOT DISTINCT WHERE %s",
			i.Table.Sanitize(), identList(i.Unique), states.NeverRan("")))
	}
	return problems
}

// keyProblems compares the table's running-slots indexes with the struct's concurrency key.
func (i *Info) keyProblems(idx []dbIndex) []string {
	var problems []string
	found := false
	for _, x := range idx {
		if x.pred != states.RunningDeparsed() || !slices.Contains(x.columns, "lock_slot") {
			continue
		}
		key := slices.DeleteFunc(slices.Clone(x.columns), func(c string) bool { return c == "lock_slot" })
		if sameColumns(key, i.Key) {
			found = found || x.nullsNotDistinct
			continue
		}
		problems = append(problems, i.keyIndexProblem(x.name, key))
	}
	if len(i.Key) > 0 && !found && len(problems) == 0 {
		problems = append(problems, fmt.Sprintf(
			"the running-slots index is missing: CREATE UNIQUE INDEX ON %s (%s, lock_slot) NULLS NOT DISTINCT WHERE %s",
			i.Table.Sanitize(), identList(i.Key), states.Running("")))
	}
	return problems
}

// uniqueIndexProblem describes an until-executed unique index over other columns than the struct's
// unique fields.
func (i *Info) uniqueIndexProblem(x dbIndex) string {
	side := fmt.Sprintf("%s has no unique fields", i.typeName())
	if len(i.Unique) > 0 {
		side = fmt.Sprintf("%s's unique fields are (%s)", i.typeName(), strings.Join(i.Unique, ", "))
	}
	fixes := i.tagFixes("unique", x.columns, func(f *Field) bool { return f.Unique })
	return fmt.Sprintf("the until-executed unique index %q is on (%s) but %s: %s, "+
		"or change the kind's unique key on purpose in a migration (the index and the kind's row in jobpipe_kinds)",
		x.name, strings.Join(x.columns, ", "), side, strings.Join(fixes, " and "))
}

// keyIndexProblem describes a running-slots index over another key than the struct's.
func (i *Info) keyIndexProblem(index string, key []string) string {
	side := fmt.Sprintf("%s has no key", i.typeName())
	if len(i.Key) > 0 {
		side = fmt.Sprintf("%s's key is (%s)", i.typeName(), strings.Join(i.Key, ", "))
	}
	var fixes []string
	keyTagged := func(f *Field) bool { return f.Key }
	if i.noKey {
		fixes = append(fixes, "leave out the NoKey option")
		// Without NoKey the key is the key-tagged fields, else the unique ones.
		if !slices.ContainsFunc(i.Fields, func(f Field) bool { return f.Key }) && sameColumns(key, i.Unique) {
			keyTagged = nil
		}
	}
	if keyTagged != nil {
		fixes = append(fixes, i.tagFixes("key", key, keyTagged)...)
	}
	return fmt.Sprintf("the running-slots index %q makes (%s) the concurrency key but %s: %s, "+
		"or change the kind's key on purpose in a migration (the index and the kind's row in jobpipe_kinds)",
		index, strings.Join(key, ", "), side, strings.Join(fixes, " and "))
}

// tagFixes says which tags make the struct's option (unique or key) cover exactly the columns want:
// tagged reports whether a field carries the option now.
func (i *Info) tagFixes(option string, want []string, tagged func(*Field) bool) []string {
	var fixes []string
	for _, col := range want {
		switch f := i.field(col); {
		case f == nil:
			fixes = append(fixes, fmt.Sprintf("add a field for column %q tagged ,%s", col, option))
		case !tagged(f):
			fixes = append(fixes, fmt.Sprintf("add ,%s to the tag of field %s", option, f.GoName))
		}
	}
	for j := range i.Fields {
		if f := &i.Fields[j]; tagged(f) && !slices.Contains(want, f.Column) {
			fixes = append(fixes, fmt.Sprintf("remove ,%s from the tag of field %s", option, f.GoName))
		}
	}
	if len(fixes) == 0 {
		fixes = append(fixes, fmt.Sprintf("correct %s's tags", i.typeName()))
	}
	return fixes
}

// sameColumns reports whether a and b hold the same columns, in any order.
func sameColumns(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// registryRow is what jobpipe_kinds records of a kind's keys.
type registryRow struct {
	unique, key []string
}

// matches reports whether the row records i's unique fields and key. The key's order counts: it is
// the order of the key's values in the key text that limits and locks use.
func (r *registryRow) matches(i *Info) bool {
	return slices.Equal(r.unique, i.Unique) && slices.Equal(r.key, i.Key)
}

// registryExistsSQL asks whether jobpipe_kinds exists before it is read: a statement that fails on a
// missing table would abort the caller's transaction, and Check must work without jobpipe's tables.
const registryExistsSQL = `SELECT to_regclass('jobpipe_kinds') IS NOT NULL`

// registryRowSQL reads what the registry records of a kind's keys.
const registryRowSQL = `SELECT unique_columns, key_columns FROM jobpipe_kinds WHERE name = $1`

// readRegistry returns the kind's registry row, or nil when the kind has none or jobpipe's tables are
// missing (Register reports that).
func readRegistry(ctx context.Context, db DB, kind string) (*registryRow, error) {
	var migrated bool
	if err := db.QueryRow(ctx, registryExistsSQL).Scan(&migrated); err != nil {
		return nil, fmt.Errorf("jobinfo: reading the registry row of kind %q: %w", kind, err)
	}
	if !migrated {
		return nil, nil
	}
	var r registryRow
	err := db.QueryRow(ctx, registryRowSQL, kind).Scan(&r.unique, &r.key)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("jobinfo: reading the registry row of kind %q: %w", kind, err)
	}
	return &r, nil
}

// registryProblem names the registered keys, the struct's, and the two ways to agree.
func (i *Info) registryProblem(r *registryRow) string {
	return fmt.Sprintf("kind %q is registered in jobpipe_kinds with unique_columns %s and key_columns %s, but %s gives %s and %s: "+
		"correct %s's tags, or change the kind on purpose in a migration that changes its table's indexes and runs "+
		"UPDATE jobpipe_kinds SET unique_columns = '%s', key_columns = '%s' WHERE name = %s",
		i.Name, pgArray(r.unique), pgArray(r.key), i.typeName(), pgArray(i.Unique), pgArray(i.Key),
		i.typeName(), pgArray(i.Unique), pgArray(i.Key), literal(i.Name))
}

// pgArray writes validated column names as PostgreSQL writes a text array.
func pgArray(cols []string) string { return "{" + strings.Join(cols, ",") + "}" }
