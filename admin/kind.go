package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
)

// ErrUnknownKind is returned for a kind that is not in the registry. It is limits.ErrUnknownKind, so
// one errors.Is check covers both packages.
var ErrUnknownKind = limits.ErrUnknownKind

// ErrTableMissing is returned for a registered kind whose table does not exist.
var ErrTableMissing = errors.New("admin: the kind's table is missing")

// Kind is a registered kind as read from the registry and its table.
type Kind struct {
	// Info describes the kind as the rest of jobpipe does. Its Fields carry column names only (no Go
	// types); Backoff is nil, and KeyLimit is the configured per-key limit recorded at registration
	// (jobinfo.DefaultKeyLimit when none was recorded).
	Info *jobinfo.Info
	// Columns are the data columns in table order.
	Columns []Column
}

// Name returns the kind's name.
func (k *Kind) Name() string { return k.Info.Name }

// Column is one data column of a kind's table.
type Column struct {
	// Name is the column's name.
	Name string
	// Type is the type's name as in information_schema.columns.udt_name: int8, text, _text, jsonb...
	Type string
	// Nullable is whether the column admits NULL.
	Nullable bool
	// HasDefault is whether an insert may leave the column out.
	HasDefault bool
	// SQLType is the type as PostgreSQL writes it, with its modifiers: "bigint", "character
	// varying(20)", "numeric(10,2)", "text[]". Messages name columns' types by it.
	SQLType string

	// mod is the type modifier (pg_attribute.atttypmod): the length of a varchar(n), the precision
	// and scale of a numeric(p,s); -1 when the type has none.
	mod int32
}

// Column returns the data column named name, or false.
func (k *Kind) Column(name string) (Column, bool) {
	for _, c := range k.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return Column{}, false
}

// LoadKind reads one kind from the registry and its table's columns from the catalog.
func LoadKind(ctx context.Context, db jobinfo.DB, name string) (*Kind, error) {
	kinds, err := loadKinds(ctx, db, kindsSQL+` WHERE name = $1`, name)
	if err != nil {
		return nil, err
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("%w %q: it is not in jobpipe_kinds; a kind is recorded when a dispatcher registers it (or by jobinfo's Register); `jobpipe kinds` lists the registered ones", ErrUnknownKind, name)
	}
	return kinds[0], nil
}

// Kinds reads every registered kind, ordered by name. A kind whose table is missing does not hide
// the others: Kinds returns those it could read together with an error that names each missing
// table and matches ErrTableMissing; any other error returns no kinds.
func Kinds(ctx context.Context, db jobinfo.DB) ([]*Kind, error) {
	return loadKinds(ctx, db, kindsSQL+` ORDER BY name`)
}

func loadKinds(ctx context.Context, db jobinfo.DB, query string, args ...any) ([]*Kind, error) {
	rows, err := db.Query(ctx, query, args...)
	if err != nil {
		return nil, wrapRegistry(err)
	}
	infos, err := pgx.CollectRows(rows, scanInfo)
	if err != nil {
		return nil, wrapRegistry(err)
	}
	kinds := make([]*Kind, 0, len(infos))
	var missing []error
	for _, info := range infos {
		cols, err := readColumns(ctx, db, info)
		if errors.Is(err, ErrTableMissing) {
			missing = append(missing, err)
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, c := range cols {
			info.Fields = append(info.Fields, jobinfo.Field{Column: c.Name, GoName: c.Name,
				Unique: contains(info.Unique, c.Name), Key: contains(info.Key, c.Name)})
		}
		kinds = append(kinds, &Kind{Info: info, Columns: cols})
	}
	return kinds, errors.Join(missing...)
}

func scanInfo(r pgx.CollectableRow) (*jobinfo.Info, error) {
	var (
		info              jobinfo.Info
		schema            *string
		table, order      string
		maxAttempts, kLim *int
	)
	if err := r.Scan(&info.Name, &schema, &table, &info.Unique, &info.Key, &order, &maxAttempts, &kLim); err != nil {
		return nil, err
	}
	info.Table = pgx.Identifier{table}
	if schema != nil {
		info.Table = pgx.Identifier{*schema, table}
	}
	info.Order = jobinfo.Order(order)
	info.MaxAttempts = jobinfo.DefaultMaxAttempts
	if maxAttempts != nil {
		info.MaxAttempts = *maxAttempts
	}
	info.KeyLimit = jobinfo.DefaultKeyLimit
	if kLim != nil {
		info.KeyLimit = *kLim
	}
	return &info, nil
}

// readColumns reads the data columns of the kind's table: every column but the pipeline's.
func readColumns(ctx context.Context, db jobinfo.DB, info *jobinfo.Info) ([]Column, error) {
	rows, err := db.Query(ctx, columnsSQL, info.Table.Sanitize())
	if err != nil {
		return nil, fmt.Errorf("admin: kind %q: reading the columns of table %s: %w", info.Name, info.Table.Sanitize(), err)
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Column, error) {
		var c Column
		err := r.Scan(&c.Name, &c.Type, &c.Nullable, &c.HasDefault, &c.SQLType, &c.mod)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("admin: kind %q: reading the columns of table %s: %w", info.Name, info.Table.Sanitize(), err)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%w: kind %q has no table %s: apply the migration that creates it (jobpipe migrate up --dir ...)",
			ErrTableMissing, info.Name, info.Table.Sanitize())
	}
	data := all[:0]
	for _, c := range all {
		if !isPipelineColumn(c.Name) {
			data = append(data, c)
		}
	}
	return data, nil
}

func isPipelineColumn(name string) bool {
	for _, c := range jobinfo.PipelineColumns {
		if c.Name == name {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func wrapRegistry(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return jobinfo.ErrNotMigrated
	}
	return fmt.Errorf("admin: reading the registry of kinds: %w", err)
}
