package jobinfo

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNotMigrated is returned when jobpipe's own tables are missing.
var ErrNotMigrated = errors.New("jobinfo: jobpipe's tables are missing: run `jobpipe migrate up` (or migrations.Up) first")

const registerSQL = `
INSERT INTO jobpipe_kinds (name, table_schema, table_name, unique_columns, key_columns, job_order, max_attempts, key_limit)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (name) DO UPDATE SET table_schema = EXCLUDED.table_schema, table_name = EXCLUDED.table_name,
    unique_columns = EXCLUDED.unique_columns, key_columns = EXCLUDED.key_columns,
    job_order = EXCLUDED.job_order, max_attempts = EXCLUDED.max_attempts,
    key_limit = EXCLUDED.key_limit, updated_at = now()
WHERE jobpipe_kinds.unique_columns = EXCLUDED.unique_columns AND jobpipe_kinds.key_columns = EXCLUDED.key_columns`

// Register checks the kind's table (see Check) and records the kind in the jobpipe_kinds registry, where
// the command line and the dashboard find it. It is idempotent. It never changes the unique or key
// columns a kind is registered with: a kind whose struct gives others is refused with a *MismatchError
// (a migration changes them on purpose, see Check).
func (k *Kind[T]) Register(ctx context.Context, db DB) error {
	return k.info.Register(ctx, db)
}

// Register is Kind.Register for the non-generic description.
func (i *Info) Register(ctx context.Context, db DB) error {
	if err := i.Check(ctx, db); err != nil {
		return err
	}
	var schema *string
	if len(i.Table) == 2 {
		schema = &i.Table[0]
	}
	var keyLimit *int // recorded for tools that show the limit in force; NULL for kinds without a key
	if len(i.Key) > 0 {
		keyLimit = &i.KeyLimit
	}
	tag, err := db.Exec(ctx, registerSQL, i.Name, schema, i.Table[len(i.Table)-1],
		nonNil(i.Unique), nonNil(i.Key), string(i.Order), i.MaxAttempts, keyLimit)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
			return ErrNotMigrated
		}
		return fmt.Errorf("jobinfo: registering kind %q: %w", i.Name, err)
	}
	if tag.RowsAffected() == 0 {
		// The row's keys changed after Check read them: refuse as Check would have.
		return i.registryChanged(ctx, db)
	}
	return nil
}

// registryChanged is Register's error when the registry row's keys differ from the kind's.
func (i *Info) registryChanged(ctx context.Context, db DB) error {
	reg, err := readRegistry(ctx, db, i.Name)
	if err != nil {
		return err
	}
	if reg == nil || reg.matches(i) {
		return fmt.Errorf("jobinfo: registering kind %q: its registry row changed while it was being registered: register again", i.Name)
	}
	return &MismatchError{Kind: i.Name, Table: i.Table.Sanitize(), Problems: []string{i.registryProblem(reg)}}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
