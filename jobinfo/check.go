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
	name     string
	udt      string
	nullable bool
	// hasDefault is true for a column an insert may leave out: one with a default, an identity, or a
	// generated column.
	hasDefault bool
}

// Check compares the kind's table in the database with the kind's definition: every data and pipeline
// column with a compatible type and nullability; no other column that an insert would have to fill (NOT
// NULL without a default); the until-executed unique index and the running-slots index over exactly the
// struct's unique fields and key; and the unique and key columns recorded for the kind in the
// jobpipe_kinds registry, when the kind has a row there. It returns a *MismatchError listing every
// problem, or nil.
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
	reg, err := readRegistry(ctx, db, i.Name)
	if err != nil {
		return err
	}
	if reg != nil && !reg.matches(i) {
		mismatch.Problems = append(mismatch.Problems, i.registryProblem(reg))
	}
	if len(mismatch.Problems) > 0 {
		return mismatch
	}
	return nil
}

func (i *Info) columnProblems(list []dbColumn) []string {
	cols := make(map[string]dbColumn, len(list))
	for _, c := range list {
		cols[c.name] = c
	}
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
	// Enqueue inserts the struct's columns only, so every other column must be able to fill itself.
	for _, c := range list {
		if !c.nullable && !c.hasDefault && i.field(c.name) == nil && !isPipelineColumn(c.name) {
			problems = append(problems, fmt.Sprintf("column %q is NOT NULL and not in %s: add a field for it or give the column a default",
				c.name, i.typeName()))
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

// field returns the field of column col, or nil.
func (i *Info) field(col string) *Field {
	for j := range i.Fields {
		if i.Fields[j].Column == col {
			return &i.Fields[j]
		}
	}
	return nil
}

// typeName names the kind's struct in messages.
func (i *Info) typeName() string {
	if i.TypeName == "" {
		return "the struct"
	}
	return i.TypeName
}

// The table's name is passed as a parameter (already sanitised) to to_regclass, so it is parsed as a
// name, never as SQL, and resolved through the search_path like every other statement.
const columnsQuery = `
SELECT a.attname, t.typname, NOT a.attnotnull, a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> ''
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`

// indexesQuery lists the valid unique indexes over plain columns; expression indexes have attnum 0 in
// indkey and are left out.
const indexesQuery = `
SELECT c.relname, array_agg(a.attname ORDER BY k.ord), coalesce(pg_get_expr(i.indpred, i.indrelid), ''),
    i.indnullsnotdistinct
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indisvalid
  AND NOT (0 = ANY (i.indkey))
GROUP BY i.indexrelid, c.relname, i.indpred, i.indrelid, i.indnullsnotdistinct
ORDER BY c.relname`

// readColumns returns the table's columns in table order; none when the table does not exist.
func readColumns(ctx context.Context, db DB, table string) ([]dbColumn, error) {
	rows, err := db.Query(ctx, columnsQuery, table)
	if err != nil {
		return nil, fmt.Errorf("jobinfo: reading the columns of %s: %w", table, err)
	}
	defer rows.Close()
	var cols []dbColumn
	for rows.Next() {
		var c dbColumn
		if err := rows.Scan(&c.name, &c.udt, &c.nullable, &c.hasDefault); err != nil {
			return nil, fmt.Errorf("jobinfo: reading the columns of %s: %w", table, err)
		}
		cols = append(cols, c)
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
		if err := rows.Scan(&x.name, &x.columns, &x.pred, &x.nullsNotDistinct); err != nil {
			return nil, fmt.Errorf("jobinfo: reading the indexes of %s: %w", table, err)
		}
		idx = append(idx, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("jobinfo: reading the indexes of %s: %w", table, err)
	}
	return idx, nil
}
