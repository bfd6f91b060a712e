package migrations_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/migrations"
)

func TestUnreachableDatabase(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/x?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	err = migrations.Up(context.Background(), pool)
	for _, part := range []string{"migrations: ", "cannot connect to PostgreSQL at 127.0.0.1:1", "DATABASE_URL", "--database-url"} {
		if err == nil || !strings.Contains(err.Error(), part) {
			t.Fatalf("Up err = %v, want it to contain %q", err, part)
		}
	}
}

func TestSearchPathWithoutSchema(t *testing.T) {
	t.Parallel()
	cfg := testenv.NewSchema(t).Config()
	cfg.ConnConfig.RuntimeParams["search_path"] = "no_such_schema_here"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	err = migrations.Up(context.Background(), pool)
	const want = `migrations: no schema to migrate: search_path "no_such_schema_here" names no existing schema; ` +
		`create the schema or fix search_path (in the database URL: ?search_path=SCHEMA)`
	if err == nil || err.Error() != want {
		t.Fatalf("Up err =\n%v\nwant\n%s", err, want)
	}
}

func TestBadAppDir(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	db := stdlib.OpenDBFromPool(s.Pool)
	defer db.Close()
	file := filepath.Join(t.TempDir(), "file.sql")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	for dir, want := range map[string]string{
		missing: "migrations: migration directory " + missing + " does not exist; pass the directory that holds your goose .sql files",
		file:    "migrations: migration directory " + file + " is a file, not a directory; pass the directory that holds your goose .sql files",
	} {
		_, err := migrations.NewRunner(context.Background(), db, dir)
		if err == nil || err.Error() != want {
			t.Errorf("NewRunner(%s) err =\n%v\nwant\n%s", dir, err, want)
		}
	}
}
