package migrations_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// testSchema is a fresh schema for one test; its pool's search_path selects it.
type testSchema struct {
	Pool *pgxpool.Pool
	Name string
	URL  string
}

// testDatabaseURL is the server the tests use: TEST_DATABASE_URL, else the local default.
func testDatabaseURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://root@127.0.0.1:5432/postgres?sslmode=disable"
}

// newSchema creates a uniquely named schema, dropped when the test ends.
// TODO: replace with testenv.NewSchema once internal/testenv provides it.
func newSchema(t *testing.T) *testSchema {
	t.Helper()
	ctx := context.Background()
	buf := make([]byte, 6)
	_, _ = rand.Read(buf)
	name := "migrations_test_" + hex.EncodeToString(buf)

	admin, err := pgx.Connect(ctx, testDatabaseURL())
	if err != nil {
		t.Fatalf("connecting to %s: %v", testDatabaseURL(), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		admin, err := pgx.Connect(ctx, testDatabaseURL())
		if err != nil {
			t.Errorf("dropping schema %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", name, err)
		}
	})

	u, err := url.Parse(testDatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &testSchema{Pool: pool, Name: name, URL: u.String()}
}

// tables returns the tables in the schema, sorted.
func (s *testSchema) tables(t *testing.T) []string {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(),
		`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, s.Name)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}
