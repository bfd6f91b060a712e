package admin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/uniqueness"
)

// A kind whose table and columns have names that need quoting (a quote, a space, capitals, reserved
// words, the alias d of admin's own statements), recorded in the registry by hand: every statement
// quotes them.
func TestHostileIdentifiers(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	cols := []string{`"select" bigint NOT NULL`, `"a""b" text`, `"Mixed Case" jsonb`, `"d" integer`}
	for _, c := range jobinfo.PipelineColumns {
		cols = append(cols, pgx.Identifier{c.Name}.Sanitize()+" "+c.DDL)
	}
	exec(t, s, `CREATE TABLE "we""ird table" (`+strings.Join(cols, ", ")+`)`)
	exec(t, s, `CREATE UNIQUE INDEX ON "we""ird table" ("select") NULLS NOT DISTINCT WHERE `+jobinfo.UniqueWaitingCondition)
	exec(t, s, `INSERT INTO jobpipe_kinds (name, table_name, unique_columns, key_columns) VALUES ('hostile', 'we"ird table', '{select}', '{select,"a\"b"}')`)
	k := load(t, s, "hostile")
	var names []string
	for _, c := range k.Columns {
		names = append(names, c.Name+" "+c.SQLType)
	}
	assertRows(t, "columns", names, []string{"select bigint", `a"b text`, "Mixed Case jsonb", "d integer"})

	for _, tt := range []struct {
		data string
		want uniqueness.Result
	}{
		{`{"select": 1, "a\"b": "x", "Mixed Case": {"k": 1}, "d": 4}`, uniqueness.Result{ID: 1}},
		{`{"select": 1, "a\"b": "other"}`, uniqueness.Result{ID: 1, Duplicate: true}},
		{`{"select": 2, "a\"b": "y'z", "d": 5}`, uniqueness.Result{ID: 3}}, // the duplicate used id 2
	} {
		res, err := admin.Enqueue(ctx, s.Pool, k, admin.EnqueueRequest{Data: []byte(tt.data)})
		if err != nil || res != tt.want {
			t.Errorf("Enqueue(%s) = %+v, %v; want %+v", tt.data, res, err, tt.want)
		}
	}
	assertRows(t, "jobs of one key", listJobs(t, ctx, k, s.Pool, admin.Filter{Key: `[1, "x"]`}),
		[]string{`1 waiting [1, "x"] {"select":1,"a\"b":"x","Mixed Case":{"k": 1},"d":4}`})
	assertRows(t, "waiting jobs", listJobs(t, ctx, k, s.Pool, admin.Filter{State: jobinfo.StateWaiting}), []string{
		`3 waiting [2, "y'z"] {"select":2,"a\"b":"y'z","Mixed Case":null,"d":5}`,
		`1 waiting [1, "x"] {"select":1,"a\"b":"x","Mixed Case":{"k": 1},"d":4}`,
	})
	sum, err := admin.Summarize(ctx, s.Pool, k)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summaryString(sum), "hostile waiting=2 due=2 running=0 processed=0 failed=0 max=-1 paused=false oldest=0s lag=0s"; got != want {
		t.Errorf("summary:\n got %s\nwant %s", got, want)
	}

	steps := []struct {
		name string
		run  func() (admin.ActionResult, error)
		want admin.ActionResult
	}{
		{"discard", func() (admin.ActionResult, error) { return admin.Discard(ctx, s.Pool, k, []int64{1, 3}, "it's odd") },
			admin.ActionResult{Changed: []int64{1, 3}}},
		{"retry", func() (admin.ActionResult, error) { return admin.Retry(ctx, s.Pool, k, []int64{1}) },
			admin.ActionResult{Changed: []int64{1}}},
		{"run now", func() (admin.ActionResult, error) { return admin.RunNow(ctx, s.Pool, k, []int64{1}) },
			admin.ActionResult{Skipped: []admin.Skipped{{ID: 1, Reason: admin.ReasonAlreadyDue}}}},
	}
	for _, st := range steps {
		res, err := st.run()
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		assertResult(t, res, st.want.Changed, st.want.Skipped)
	}
	n, err := admin.RetryAllFailed(ctx, s.Pool, k, nil)
	if err != nil || n != 1 {
		t.Errorf("RetryAllFailed = %d, %v; want 1", n, err)
	}
	assertRows(t, "rows", pipelineRows(t, s, `we"ird table`), []string{
		"1 waiting attempts=0 token=0 slot=- after=now error=discarded by an operator: it's odd",
		"3 waiting attempts=0 token=0 slot=- after=now error=discarded by an operator: it's odd",
	})
}
