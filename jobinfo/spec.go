package jobinfo

import (
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Order is how the jobs of one key are ordered: the next job of a key is the first waiting one in this
// order, and it starts only once it is due.
type Order string

const (
	// OrderCreated is happens-before order: jobs of a key start in the order they were enqueued. A waiting
	// job that is not yet due (scheduled, or retrying with backoff) holds back the later jobs of its key.
	OrderCreated Order = "created"
	// OrderProcessAfter is first-ready-first-served: jobs of a key start in the order of their due time
	// (process_after, or created_at when it is NULL). A job retrying with backoff lets later-due jobs go
	// first.
	OrderProcessAfter Order = "process_after"
)

// Validate reports whether o is a known order.
func (o Order) Validate() error {
	if o != OrderCreated && o != OrderProcessAfter {
		return fmt.Errorf("jobinfo: order %q is unknown: use %q or %q", string(o), OrderCreated, OrderProcessAfter)
	}
	return nil
}

// Column is one data column of a kind's table.
type Column struct {
	// Name is the column name.
	Name string
	// Type is the column's PostgreSQL type, one ParseColumnType accepts.
	Type string
	// Nullable is whether the column admits NULL.
	Nullable bool
}

// TableSpec is what it takes to create a kind's table: its data columns, unique key, concurrency key and
// order. It is produced from a Go struct by Kind.TableSpec or written by hand (`jobpipe kind new` does).
type TableSpec struct {
	// Kind is the kind's name, recorded in the jobpipe_kinds registry.
	Kind string
	// Table is the table name, optionally schema-qualified ("billing.deliveries"). Empty means Kind.
	Table string
	// Columns are the data columns, in table order.
	Columns []Column
	// Unique lists the columns of the until-executed unique key; empty means jobs are never merged.
	Unique []string
	// Key lists the columns of the concurrency key: per-key order and running limits apply to it.
	// Empty means no key.
	Key []string
	// Order is the order of jobs within a key. Empty means OrderCreated.
	Order Order
}

// Validate checks every name and type and the consistency of the keys, and returns every problem found
// in one error.
func (s TableSpec) Validate() error {
	var errs []error
	if err := ValidateName("kind", s.Kind); err != nil {
		errs = append(errs, err)
	}
	if _, _, err := splitTableName(s.tableName()); err != nil {
		errs = append(errs, err)
	}
	if s.Order != "" {
		if err := s.Order.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(s.Columns) == 0 {
		errs = append(errs, fmt.Errorf("jobinfo: kind %q has no data columns: give at least one", s.Kind))
	}
	seen := map[string]bool{}
	for _, c := range s.Columns {
		if err := ValidateName("column", c.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		if isPipelineColumn(c.Name) {
			errs = append(errs, fmt.Errorf("jobinfo: column %q is a pipeline column jobpipe adds itself: rename the data column", c.Name))
		}
		if seen[c.Name] {
			errs = append(errs, fmt.Errorf("jobinfo: column %q is given twice", c.Name))
		}
		seen[c.Name] = true
		if _, err := parseColumnType(c.Type); err != nil {
			errs = append(errs, fmt.Errorf("%w (column %q)", err, c.Name))
		}
	}
	errs = append(errs, checkKeyColumns("unique", s.Unique, seen)...)
	errs = append(errs, checkKeyColumns("key", s.Key, seen)...)
	for _, c := range s.Columns {
		if c.Nullable && slices.Contains(s.Key, c.Name) {
			errs = append(errs, fmt.Errorf("jobinfo: key column %q is nullable: a concurrency key must be NOT NULL", c.Name))
		}
	}
	return errors.Join(errs...)
}

func checkKeyColumns(what string, cols []string, known map[string]bool) []error {
	var errs []error
	for i, c := range cols {
		if !known[c] {
			errs = append(errs, fmt.Errorf("jobinfo: %s column %q is not a data column", what, c))
		}
		if slices.Contains(cols[:i], c) {
			errs = append(errs, fmt.Errorf("jobinfo: %s column %q is listed twice", what, c))
		}
	}
	return errs
}

func (s TableSpec) tableName() string {
	if s.Table == "" {
		return s.Kind
	}
	return s.Table
}

func (s TableSpec) order() Order {
	if s.Order == "" {
		return OrderCreated
	}
	return s.Order
}

// identifier returns the table as a pgx.Identifier; s must be valid.
func (s TableSpec) identifier() pgx.Identifier {
	schema, table, _ := splitTableName(s.tableName())
	if schema == "" {
		return pgx.Identifier{table}
	}
	return pgx.Identifier{schema, table}
}
