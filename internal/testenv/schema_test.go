package testenv

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestSchemasAreIsolatedAndDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var a, b *Schema
	t.Run("use", func(t *testing.T) {
		a, b = NewSchema(t), NewSchema(t)
		if a.Name == b.Name {
			t.Fatalf("two schemas named %s", a.Name)
		}
		if _, err := a.Pool.Exec(ctx, "CREATE TABLE only_in_a (id int)"); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := b.Pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a' AND schemaname = current_schema()").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Error("a table created in schema a is visible in schema b")
		}
		if _, err := b.Pool.Exec(ctx, "SELECT * FROM only_in_a"); err == nil {
			t.Error("schema b's pool can select from schema a's table")
		}
		if _, err := a.Pool.Exec(ctx, "SELECT * FROM only_in_a"); err != nil {
			t.Errorf("schema a's pool cannot select from its own table: %v", err)
		}
	})

	// The cleanups of "use" have run: both schemas must be gone.
	conn, err := pgx.Connect(ctx, postgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname IN ($1, $2)", a.Name, b.Name).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d of the schemas %s, %s still exist after their test ended", left, a.Name, b.Name)
	}
}

func TestSchemaSearchPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewSchema(t)

	check := func(what string, q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) {
		t.Helper()
		var current, path string
		if err := q.QueryRow(ctx, "SELECT current_schema(), current_setting('search_path')").Scan(&current, &path); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if current != s.Name || path != s.Name {
			t.Errorf("%s: current_schema %q, search_path %q; want %q for both", what, current, path, s.Name)
		}
	}
	check("Pool", s.Pool)

	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatalf("connect to URL %s: %v", redact(s.URL), err)
	}
	defer conn.Close(ctx)
	check("a connection from URL", conn)

	cfg := s.Config()
	if cfg == s.Config() {
		t.Error("Config returned the same *pgxpool.Config twice: want a fresh copy each time")
	}
	if got := cfg.ConnConfig.RuntimeParams["search_path"]; got != s.Name {
		t.Errorf("Config search_path = %q, want %q", got, s.Name)
	}
}
