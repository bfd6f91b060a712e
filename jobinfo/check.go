package jobinfo

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// MismatchError lists every way a table differs from its kind's definition.
type MismatchError struct {
	// Kind is the kind's name.
	Kind string
	// Table is the table's name as written in SQL.
	Table string
	// Problems says what is wrong, one line each.
	Problems []string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("jobinfo: table %s does not match kind %q (%d problems):\n  - %s",
		e.Table, e.Kind, len(e.Problems), strings.Join(e.Problems, "\n  - "))
}

type dbColumn struct {
	udt      string
	nullable bool
}

// Check compares the kind's table in the database with the kind's definition: every data and pipeline
// column with a compatible type and nullability, the until-executed unique index and the running-slots
// index. It returns a *MismatchError listing every problem, or nil.
func (k *Kind[T]) Check(ctx context.Context, db DB) error {
	return k.info.Check(ctx, db)
}

// Check is Kind.Check for the non-generic description.
func (i *Info) Check(ctx context.Context, db DB) error {
	table := i.Table.Sanitize()
	cols, err := readColumns(ctx, db, table)
	if err != nil {
		return err
	}
	mismatch := &MismatchError{Kind: i.Name, Table: table}
	if len(cols) == 0 {
		mismatch.Problems = append(mismatch.Problems, fmt.Sprintf(
			"table %s does not exist: create it with `jobpipe kind new %s ...` or TableSpec.CreateSQL and run the migration", table, i.Name))
		return mismatch
	}
	mismatch.Problems = append(mismatch.Problems, i.columnProblems(cols)...)
	idx, err := readIndexes(ctx, db, table)
	if err != nil {
		return err
	}
	mismatch.Problems = append(mismatch.Problems, i.indexProblems(idx)...)
	if len(mismatch.Problems) > 0 {
		return mismatch
	}
	return nil
}

func (i *Info) columnProblems(cols map[string]dbColumn) []string {
	var problems []string
	for _, f := range i.Fields {
		c, ok := cols[f.Column]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("column %q (field %s) is missing: add it as %s", f.Column, f.GoName, udtDDL[f.rule.udts[0]]))
		case !slices.Contains(f.rule.udts, c.udt):
			problems = append(problems, fmt.Sprintf("column %q (field %s, Go type %s) has type %s: expected %s",
				f.Column, f.GoName, f.Type, c.udt, strings.Join(f.rule.udts, " or ")))
		case c.nullable && slices.Contains(i.Key, f.Column):
			problems = append(problems, fmt.Sprintf("key column %q is nullable: a concurrency key must be NOT NULL", f.Column))
		case c.nullable && !f.rule.nilable:
			problems = append(problems, fmt.Sprintf("column %q is nullable but field %s (%s) cannot hold NULL: make the field a pointer or the column NOT NULL",
				f.Column, f.GoName, f.Type))
		}
	}
	for _, p := range PipelineColumns {
		c, ok := cols[p.Name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("pipeline column %q is missing: add it as %s", p.Name, p.DDL))
		case c.udt != p.UDT:
			problems = append(problems, fmt.Sprintf("pipeline column %q has type %s: expected %s", p.Name, c.udt, p.UDT))
		case c.nullable != p.Nullable:
			problems = append(problems, fmt.Sprintf("pipeline column %q nullability is wrong: expected %s", p.Name, p.DDL))
		}
	}
	return problems
}

func (i *Info) indexProblems(idx []dbIndex) []string {
	var problems []string
	if len(i.Unique) > 0 && !hasIndex(idx, i.Unique, parsedNeverRun) {
		problems = append(problems, fmt.Sprintf(
			"the until-executed unique index is missing: CREATE UNIQUE INDEX ON %s (%s) NULLS NOT DISTINCT WHERE %s",
			i.Table.Sanitize(), identList(i.Unique), condNeverRun))
	}
	if len(i.Key) > 0 && !hasIndex(idx, append(slices.Clone(i.Key), "lock_slot"), parsedRunning) {
		problems = append(problems, fmt.Sprintf(
			"the running-slots index is missing: CREATE UNIQUE INDEX ON %s (%s, lock_slot) NULLS NOT DISTINCT WHERE %s",
			i.Table.Sanitize(), identList(i.Key), condRunning))
	}
	return problems
}

type dbIndex struct {
	columns []string
	pred    string
}

// hasIndex reports whether a unique, NULLS NOT DISTINCT index over exactly cols (any order) with the
// predicate pred exists.
func hasIndex(idx []dbIndex, cols []string, pred string) bool {
	want := slices.Sorted(slices.Values(cols))
	for _, x := range idx {
		if x.pred == pred && slices.Equal(slices.Sorted(slices.Values(x.columns)), want) {
			return true
		}
	}
	return false
}

// The table's name is passed as a parameter (already sanitised) to to_regclass, so it is parsed as a
// name, never as SQL, and resolved through the search_path like every other statement.
const columnsQuery = `
SELECT a.attname, t.typname, NOT a.attnotnull
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`

// indexesQuery lists the unique NULLS NOT DISTINCT indexes over plain columns; expression indexes have
// attnum 0 in indkey and are left out.
const indexesQuery = `
SELECT array_agg(a.attname ORDER BY k.ord), coalesce(pg_get_expr(i.indpred, i.indrelid), '')
FROM pg_index i
CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indnullsnotdistinct AND i.indisvalid
  AND NOT (0 = ANY (i.indkey))
GROUP BY i.indexrelid, i.indpred, i.indrelid`

func readColumns(ctx context.Context, db DB, table string) (map[string]dbColumn, error) {
	rows, err := db.Query(ctx, columnsQuery, table)
	if err != nil {
		return nil, fmt.Errorf("jobinfo: reading the columns of %s: %w", table, err)
	}
	defer rows.Close()
	cols := map[string]dbColumn{}
	for rows.Next() {
		var name string
		var c dbColumn
		if err := rows.Scan(&name, &c.udt, &c.nullable); err != nil {
			return nil, fmt.Errorf("jobinfo: reading the columns of %s: %w", table, err)
		}
		cols[name] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("jobinfo: reading the columns of %s: %w", table, err)
	}
	return cols, nil
}

func readIndexes(ctx context.Context, db DB, table string) ([]dbIndex, error) {
	rows, err := db.Query(ctx, indexesQuery, table)
	if err != nil {
		return nil, fmt.Errorf("jobinfo: reading the indexes of %s: %w", table, err)
	}
	defer rows.Close()
	var idx []dbIndex
	for rows.Next() {
		var x dbIndex
		if err := rows.Scan(&x.columns, &x.pred); err != nil {
			return nil, fmt.Errorf("jobinfo: reading the indexes of %s: %w", table, err)
		}
		idx = append(idx, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("jobinfo: reading the indexes of %s: %w", table, err)
	}
	return idx, nil
}
