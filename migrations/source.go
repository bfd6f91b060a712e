package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// lockWait bounds how long a write waits for another run's migration lock: goose polls once a
// second, up to this many times.
const lockWait = 300

// source is one set of migrations with its own goose provider and version table.
type source struct {
	name   string // SourceJobpipe or SourceApp
	table  string // the goose version table, in schema
	dir    string // where the files come from, for messages
	schema string // the schema the version table lives in: the connection's current_schema()
	fsys   fs.FS

	// files are the migrations found, ascending by version. An application directory may hold
	// none yet, and then provider is nil.
	files    []*goose.Source
	provider *goose.Provider
}

func newSource(db *sql.DB, schema, name, table, dir string, fsys fs.FS) (*source, error) {
	s := &source{name: name, table: table, dir: dir, schema: schema, fsys: fsys}
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(lockID(schema, table)),
		lock.WithLockTimeout(1, lockWait),
	)
	if err != nil {
		return nil, fmt.Errorf("migrations: %s: migration lock: %w", name, err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithTableName(table),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if errors.Is(err, goose.ErrNoMigrations) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("migrations: reading %s migrations from %s: %w", name, dir, err)
	}
	s.provider = p
	s.files = p.ListSources()
	return s, nil
}

// lockID is the advisory lock key for one version table. Runs against different schemas (each
// test has its own) or different version tables do not conflict, so they must not wait for each
// other; goose's single default key would serialise every migration in the database.
func lockID(schema, table string) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "jobpipe migrations %s.%s", schema, table)
	return int64(h.Sum64())
}

// applied returns the versions recorded in the version table, each with when it was applied. A
// missing table means nothing is applied; reading does not create it, so status and version stay
// read-only.
func (s *source) applied(ctx context.Context, db *sql.DB) (map[int64]time.Time, error) {
	var exists bool
	err := db.QueryRowContext(ctx,
		`SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename = $2)`,
		s.schema, s.table).Scan(&exists)
	if err != nil {
		return nil, wrap(s.name+": reading "+s.table, err)
	}
	out := map[int64]time.Time{}
	if !exists {
		return out, nil
	}
	// goose records a zero version when it creates the table; it is not a migration.
	rows, err := db.QueryContext(ctx, `SELECT version_id, max(tstamp) FROM `+
		pgx.Identifier{s.schema, s.table}.Sanitize()+` WHERE version_id > 0 GROUP BY version_id`)
	if err != nil {
		return nil, wrap(s.name+": reading "+s.table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int64
		var at time.Time
		if err := rows.Scan(&v, &at); err != nil {
			return nil, wrap(s.name+": reading "+s.table, err)
		}
		out[v] = at
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(s.name+": reading "+s.table, err)
	}
	return out, nil
}

// unknown returns the applied versions that have no file, ascending.
func (s *source) unknown(applied map[int64]time.Time) []int64 {
	var out []int64
	for v := range applied {
		if !slices.ContainsFunc(s.files, func(f *goose.Source) bool { return f.Version == v }) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// latest is the highest version among the files, 0 when there are none.
func (s *source) latest() int64 {
	if len(s.files) == 0 {
		return 0
	}
	return s.files[len(s.files)-1].Version
}

// current is the highest applied version, 0 when none: what goose calls the database version.
func current(applied map[int64]time.Time) int64 {
	var out int64
	for v := range applied {
		out = max(out, v)
	}
	return out
}
