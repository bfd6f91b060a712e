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

type planKeyedJob struct {
	K int64 `jobpipe:"k,key"`
	N int64 `jobpipe:"n"`
}

// TestGenericPlansNeverReadTheTable checks the plans a pooled connection keeps for a kind's
// statements. A statement is prepared once and its generic plan used however the table grows, so no
// plan may read the kind's table sequentially. Each statement of a plain and of a keyed kind is
// planned generically over 100,000 waiting jobs: the size at which a join of the claimed rows to the
// table was planned as a hash join over a sequential scan (100 to 300 ms a claim a few hundred
// thousand jobs later). The plain claim without a bound must also read the ready index: the
// primary key, read from its start, holds every version of every job ever worked.
func TestGenericPlansNeverReadTheTable(t *testing.T) {
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
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	p, k := buildSQL(plain.Info()), buildSQL(keyed.Info())
	for _, c := range []struct{ name, sql, index string }{
		{"plain_claim", p.claimPlain, "plan_job_ready"},
		{"plain_claim_from", p.claimPlainFrom, ""},
		{"plain_finish", p.finish, ""},
		{"plain_extend", p.extend, ""},
		{"plain_next_due", p.nextDue, ""},
		{"plain_rescue", p.rescue, ""},
		{"plain_count_running", p.countRunning, ""},
		{"keyed_claim_ids", k.claimIDs, ""},
		{"keyed_busy_slots", k.busySlots, ""},
		{"keyed_finish", k.finish, ""},
	} {
		plan := genericPlan(ctx, t, tx, c.name, c.sql)
		if strings.Contains(plan, "Seq Scan on plan_") || !strings.Contains(plan, c.index) {
			t.Errorf("%s's generic plan reads the kind's table sequentially, or not through %q:\n%s", c.name, c.index, plan)
		}
	}
}

// genericPlan prepares sql as name in tx and returns its plan: the generic one, when the transaction
// forces generic plans. Every parameter is NULL; a generic plan does not depend on the values.
func genericPlan(ctx context.Context, t *testing.T, tx pgx.Tx, name, sql string) string {
	t.Helper()
	if _, err := tx.Exec(ctx, fmt.Sprintf("PREPARE %s AS %s", name, sql)); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var params int
	if err := tx.QueryRow(ctx, "SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = $1", name).Scan(&params); err != nil {
		t.Fatal(err)
	}
	execute := "EXECUTE " + name
	if params > 0 {
		execute += "(" + strings.TrimSuffix(strings.Repeat("NULL, ", params), ", ") + ")"
	}
	rows, err := tx.Query(ctx, "EXPLAIN "+execute)
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
