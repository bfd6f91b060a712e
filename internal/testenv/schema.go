package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// schemaTimeout bounds creating and dropping a schema.
const schemaTimeout = 30 * time.Second

// Schema is a PostgreSQL schema that belongs to one test, so that tests can run in parallel on
// one server and leave nothing behind.
type Schema struct {
	// Pool's connections have search_path set to Name only: unqualified tables are the test's own.
	Pool *pgxpool.Pool
	// Name is the schema's name: the test's name sanitised to [a-z0-9_], truncated, and a random
	// suffix; at most 63 bytes, so it never needs quoting.
	Name string
	// URL is a connection string that selects the same search_path through the "options"
	// startup parameter, for child processes and command-line tools under test (psql included).
	URL string

	config *pgxpool.Config
}

// NewSchema creates a fresh schema for t on the test PostgreSQL server and a pool whose
// connections use it. When t ends, the pool is closed and the schema dropped with everything in
// it. NewSchema fails t when no server is available (see the package documentation).
func NewSchema(t testing.TB) *Schema {
	t.Helper()
	return newSchemaOn(t, postgresURL(t))
}

// newSchemaOn is NewSchema on the server that base connects to.
func newSchemaOn(t testing.TB, base string) *Schema {
	t.Helper()
	name := schemaName(t.Name())

	ctx, cancel := context.WithTimeout(context.Background(), schemaTimeout)
	defer cancel()
	if err := execOnce(ctx, base, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("testenv: create schema %s: %v", name, err)
	}
	// Registered before the pool's Close, so it runs after it (cleanups run last first).
	t.Cleanup(func() { dropSchema(t, base, name) })

	u, err := withSearchPath(base, name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(base)
	if err != nil {
		t.Fatalf("testenv: parse %s: %v", redact(base), err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = name
	pool, err := pgxpool.NewWithConfig(ctx, cfg.Copy())
	if err != nil {
		t.Fatalf("testenv: pool for schema %s: %v", name, err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("testenv: pool for schema %s: %v", name, err)
	}
	return &Schema{Pool: pool, Name: name, URL: u, config: cfg}
}

// Config returns a fresh copy of the pool's configuration (search_path included), for a test
// that needs a pool of its own, with other sizes or hooks. The test must close that pool.
func (s *Schema) Config() *pgxpool.Config {
	return s.config.Copy()
}

// dropSchema drops the schema on its own short-lived connection: the test's pool is closed by now.
func dropSchema(t testing.TB, base, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), schemaTimeout)
	defer cancel()
	if err := execOnce(ctx, base, "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
		t.Errorf("testenv: drop schema %s: %v", name, err)
	}
}

// execOnce runs one statement on a new connection and closes it.
func execOnce(ctx context.Context, connString, sql string) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}
