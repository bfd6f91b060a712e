package dispatcher

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

type planJob struct {
	N int64 `jobpipe:"n"`
}

// TestClaimPlanNeverReadsTheTable checks the plan a pooled connection keeps for a plain kind's claim.
// pgx prepares it once per connection, and PostgreSQL keeps its generic plan, made with the table's
// size of that moment, until the table is next analyzed: the plan must not read the whole table
// whatever that size was. Two moments: a kind's first claims, on a table of 20 jobs never analyzed
// (where a lookup of the claimed ids by array alone was planned as a sequential scan), and 100,000
// waiting jobs just analyzed (where a join of the claimed rows to the table was planned as a hash
// join over a sequential scan: 100 to 300 ms a claim a few hundred thousand jobs later).
func TestClaimPlanNeverReadsTheTable(t *testing.T) {
	for _, c := range []struct {
		jobs    int
		analyze bool
	}{{20, false}, {100000, true}} {
		t.Run(fmt.Sprintf("%d jobs", c.jobs), func(t *testing.T) {
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
			stmts := []string{ddl, fmt.Sprintf("INSERT INTO plan_job (n) SELECT g FROM generate_series(1, %d) g", c.jobs)}
			if c.analyze {
				stmts = append(stmts, "ANALYZE plan_job")
			}
			for _, stmt := range stmts {
				if _, err := s.Pool.Exec(ctx, stmt); err != nil {
					t.Fatal(err)
				}
			}
			tx, err := s.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			plan := genericPlan(ctx, t, tx, buildSQL(kind.Info()).claimPlain, "1000, 300, 'node', 0")
			if strings.Contains(plan, "Seq Scan") {
				t.Errorf("the claim's generic plan reads the table sequentially:\n%s", plan)
			}
		})
	}
}

// genericPlan returns the generic plan of sql executed with args in tx.
func genericPlan(ctx context.Context, t *testing.T, tx pgx.Tx, sql, args string) string {
	t.Helper()
	for _, stmt := range []string{"SET LOCAL plan_cache_mode = force_generic_plan", "PREPARE claim AS " + sql} {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := tx.Query(ctx, "EXPLAIN EXECUTE claim("+args+")")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

type keyedPlanJob struct {
	K int64 `jobpipe:"k,key"`
	N int64 `jobpipe:"n"`
}

// TestKeyedHeadsGenericPlansNeverReadTheTable checks the generic plans of a keyed kind's heads
// statements, which its claim transaction runs with plan_cache_mode force_generic_plan, so that a
// connection keeps the plan it made the first time: neither may read the whole table, whether that
// was at a kind's first jobs, never analyzed, or at 100,000 jobs over 1,000 keys just analyzed.
func TestKeyedHeadsGenericPlansNeverReadTheTable(t *testing.T) {
	for _, c := range []struct {
		jobs    int
		analyze bool
	}{{20, false}, {100000, true}} {
		t.Run(fmt.Sprintf("%d jobs", c.jobs), func(t *testing.T) {
			ctx := t.Context()
			s := testenv.NewSchema(t)
			if err := migrations.Up(ctx, s.Pool); err != nil {
				t.Fatal(err)
			}
			kind := jobinfo.MustDefine[keyedPlanJob]("keyed_plan_job", jobinfo.KeyLimit(3))
			ddl, err := kind.TableSpec().CreateSQL()
			if err != nil {
				t.Fatal(err)
			}
			stmts := []string{ddl, fmt.Sprintf("INSERT INTO keyed_plan_job (k, n) SELECT g %% 1000, g FROM generate_series(1, %d) g", c.jobs)}
			if c.analyze {
				stmts = append(stmts, "ANALYZE keyed_plan_job")
			}
			for _, stmt := range stmts {
				if _, err := s.Pool.Exec(ctx, stmt); err != nil {
					t.Fatal(err)
				}
			}
			q := buildSQL(kind.Info())
			for _, st := range []struct{ name, sql, args string }{
				{"fast walk", q.headsFast, "100, 3, 500, 'keyed_plan_job'"},
				{"key scan", q.headsScan, "100, 3, '{1,2}', 'keyed_plan_job'"},
			} {
				t.Run(st.name, func(t *testing.T) {
					conn, err := s.Pool.Acquire(ctx)
					if err != nil {
						t.Fatal(err)
					}
					defer conn.Release()
					// genericPlan prepares "claim" on the connection, for the session.
					if _, err := conn.Exec(ctx, "DEALLOCATE ALL"); err != nil {
						t.Fatal(err)
					}
					tx, err := conn.Begin(ctx)
					if err != nil {
						t.Fatal(err)
					}
					defer tx.Rollback(ctx)
					plan := genericPlan(ctx, t, tx, st.sql, st.args)
					if strings.Contains(plan, "Seq Scan on keyed_plan_job") {
						t.Errorf("the generic plan reads the table sequentially:\n%s", plan)
					}
				})
			}
		})
	}
}
