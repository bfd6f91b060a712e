package integration_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/testenv"
)

// The tests in this file check the harness itself, against whichever servers testenv chose, so
// that a failure of the environment shows up here first rather than as a puzzling job failure.

func TestServersAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	s := testenv.NewSchema(t)
	if err := s.Pool.Ping(ctx); err != nil {
		t.Fatalf("PostgreSQL: %v", err)
	}
	var current string
	if err := s.Pool.QueryRow(ctx, "SELECT current_schema()").Scan(&current); err != nil {
		t.Fatal(err)
	}
	if current != s.Name {
		t.Errorf("current_schema() = %q, want the test's schema %q", current, s.Name)
	}

	r := testenv.NewRedis(t)
	if len(r.Clients) == 0 {
		t.Fatal("no Redis node")
	}
	for i, c := range r.Clients {
		if err := c.Ping(ctx).Err(); err != nil {
			t.Errorf("Redis node %s: %v", r.Addrs[i], err)
		}
	}
}

func TestSchemasAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := testenv.NewSchema(t), testenv.NewSchema(t)

	if _, err := a.Pool.Exec(ctx, "CREATE TABLE jobs (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Pool.Exec(ctx, "INSERT INTO jobs VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	// The same table name in b is a different table.
	if _, err := b.Pool.Exec(ctx, "CREATE TABLE jobs (id bigint PRIMARY KEY)"); err != nil {
		t.Fatalf("b cannot create its own jobs table: %v", err)
	}
	var n int
	if err := b.Pool.QueryRow(ctx, "SELECT count(*) FROM jobs").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("b's jobs table has %d rows, want 0: it sees a's rows", n)
	}
	if err := a.Pool.QueryRow(ctx, "SELECT count(*) FROM jobs").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("a's jobs table has %d rows, want 1", n)
	}
}

func TestSchemaURLSelectsSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.NewSchema(t)
	if _, err := s.Pool.Exec(ctx, "CREATE TABLE marker (v text); INSERT INTO marker VALUES ('here')"); err != nil {
		t.Fatal(err)
	}

	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT v FROM marker").Scan(&v); err != nil || v != "here" {
		t.Errorf("pgx from Schema.URL: marker = %q, %v; want here", v, err)
	}

	// Child processes are libpq programs more often than not: psql stands in for them.
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Log("psql not installed: child-process check not run")
		return
	}
	out, err := exec.CommandContext(ctx, psql, "-X", "-At", "-d", s.URL, "-c", "SELECT v FROM marker").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "here" {
		t.Errorf("psql from Schema.URL: %q, %v; want here", out, err)
	}
}

func TestRedisPrefixCleanup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	observer := testenv.NewRedis(t)

	var prefix string
	var other string
	t.Run("writer", func(t *testing.T) {
		r := testenv.NewRedis(t)
		prefix = r.Prefix
		if r.Prefix == observer.Prefix {
			t.Fatalf("two tests share the prefix %s", r.Prefix)
		}
		for _, c := range r.Clients {
			for _, k := range []string{"job:1", "lock:queue", "slot:0"} {
				if err := c.Set(ctx, r.Prefix+k, "v", 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		// A key of another test must survive this test's cleanup.
		other = observer.Prefix + "kept"
		if err := observer.Clients[0].Set(ctx, other, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	})

	for i, c := range observer.Clients {
		keys, err := c.Keys(ctx, prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 0 {
			t.Errorf("node %s still has %v after the writer ended", observer.Addrs[i], keys)
		}
	}
	if n, err := observer.Clients[0].Exists(ctx, other).Result(); err != nil || n != 1 {
		t.Errorf("the other test's key %s: exists %d, %v; want 1", other, n, err)
	}
}

func TestRedisNodesForRedlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nodes := testenv.StartRedisNodes(t, 3)
	for _, n := range nodes {
		if err := n.Client().Ping(ctx).Err(); err != nil {
			t.Errorf("node %s: %v", n.Addr, err)
		}
	}
}
