package dispatcher

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

type planJob struct {
	N int64 `jobpipe:"n"`
}

type planKeyedJob struct {
	K int64 `jobpipe:"k,key"`
	N int64 `jobpipe:"n"`
}

// TestPlansNeverReadTheTable checks the plans of the statements whose cost depends on the table's
// size: a kind's claims and finish. They are planned for each call (planPerCall), with their
// arguments, so the plans here are made the same way: custom plans, over 100,000 waiting jobs of a
// plain kind and of a keyed one. None may read the kind's table sequentially.
func TestPlansNeverReadTheTable(t *testing.T) {
	ctx := t.Context()
	s := testenv.NewSchema(t)
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	plain, keyed := jobinfo.MustDefine[planJob]("plan_job"), jobinfo.MustDefine[planKeyedJob]("plan_keyed_job")
	for _, c := range []struct {
		info *jobinfo.Info
		ddl  func() (string, error)
		fill string
	}{
		{plain.Info(), plain.TableSpec().CreateSQL, "INSERT INTO plan_job (n) SELECT g FROM generate_series(1, 100000) g"},
		{keyed.Info(), keyed.TableSpec().CreateSQL, "INSERT INTO plan_keyed_job (k, n) SELECT g % 10000, g FROM generate_series(1, 100000) g"},
	} {
		ddl, err := c.ddl()
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range []string{ddl, c.fill, "ANALYZE " + c.info.Table.Sanitize()} {
			if _, err := s.Pool.Exec(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
	}
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_custom_plan"); err != nil {
		t.Fatal(err)
	}
	// 500 jobs' outcomes or claims, as array literals (EXECUTE takes no subqueries).
	ids, ones, zeros, empty := make([]string, 500), make([]string, 500), make([]string, 500), make([]string, 500)
	for i := range ids {
		ids[i], ones[i], zeros[i], empty[i] = fmt.Sprint(40001+i), "1", "0", `""`
	}
	array := func(vals []string) string { return "'{" + strings.Join(vals, ",") + "}'" }
	p, k := buildSQL(plain.Info()), buildSQL(keyed.Info())
	for _, c := range []struct{ name, sql, args string }{
		{"claim_from_start", p.claimPlain, "1000, 300, 'node', 0"},
		{"claim_from_id", p.claimPlain, "1000, 300, 'node', 50000"},
		{"finish", p.finish, strings.Join([]string{array(ids), array(ones), array(ones), array(empty), array(zeros), "false"}, ", ")},
		{"keyed_claim", k.claimIDs, strings.Join([]string{array(ids), array(zeros), "300", "'node'", array(ids)}, ", ")},
	} {
		plan := explainExecute(ctx, t, tx, c.name, c.sql, c.args)
		if strings.Contains(plan, "Seq Scan on plan_") {
			t.Errorf("%s's plan reads the kind's table sequentially:\n%s", c.name, plan)
		}
	}
}

// explainExecute prepares sql as name in tx and returns the plan of executing it with args.
func explainExecute(ctx context.Context, t *testing.T, tx pgx.Tx, name, sql, args string) string {
	t.Helper()
	if _, err := tx.Exec(ctx, fmt.Sprintf("PREPARE %s AS %s", name, sql)); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	rows, err := tx.Query(ctx, fmt.Sprintf("EXPLAIN EXECUTE %s(%s)", name, args))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if _, err := tx.Exec(ctx, "DEALLOCATE "+name); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestClaimAndFinishArePlannedPerCall checks that a claim and a finish leave no prepared statement
// on their connection (planPerCall: a plan kept from the table's early size would be kept as it
// grows), and that they still claim the first jobs in order and record their outcomes.
func TestClaimAndFinishArePlannedPerCall(t *testing.T) {
	ctx := t.Context()
	s := testenv.NewSchema(t)
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	kind := jobinfo.MustDefine[planJob]("plan_job")
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{ddl, "INSERT INTO plan_job (n) SELECT g FROM generate_series(1, 20) g"} {
		if _, err := s.Pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	cfg := s.Config()
	cfg.MaxConns = 1 // every statement below on one session, whose prepared statements are then listed
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d, err := New(Config{DB: pool})
	if err != nil {
		t.Fatal(err)
	}
	if err := Register(d, kind, func(context.Context, *Job[planJob]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	k := d.kinds["plan_job"]
	for round := range 3 { // more than once: pgx would prepare a cached statement on its first use
		claims, err := k.claimPlain(ctx, pool, 5)
		if err != nil {
			t.Fatal(err)
		}
		batch := make([]finishReq, len(claims))
		for i, c := range claims {
			if want := int64(5*round + i + 1); c.id != want {
				t.Fatalf("round %d: claim %d is job %d; want %d (the first waiting, in order)", round, i, c.id, want)
			}
			batch[i] = finishReq{id: c.id, token: c.token, out: outProcessed}
		}
		held, err := k.runFinish(ctx, pool, batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(claims) != 5 || len(held) != 5 {
			t.Fatalf("round %d: claimed %d, finished %d; want 5 and 5", round, len(claims), len(held))
		}
	}
	var prepared []string
	rows, err := pool.Query(ctx, "SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%plan_job%' AND statement NOT LIKE '%pg_prepared_statements%'")
	if err == nil {
		prepared, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(prepared) > 0 {
		t.Fatalf("statements prepared on the connection (planned once, kept as the table grows):\n%s", strings.Join(prepared, "\n---\n"))
	}
	var processed int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM plan_job WHERE processed_at IS NOT NULL").Scan(&processed); err != nil {
		t.Fatal(err)
	}
	if processed != 15 {
		t.Fatalf("%d jobs processed; want 15", processed)
	}
}
