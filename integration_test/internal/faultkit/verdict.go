package faultkit

// The checks that hold when workers die or stall: lost jobs, duplicates each justified by a lease
// taken back, no two attempts holding a key at once, and what the rescues and latencies were.

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// CheckLostAndDuplicates checks how the jobs ids of table (ledger kind ledgerKind) ended: lost counts those neither
// processed nor, when failed(id), failed (a job not in the table counts too). duplicates counts the
// jobs whose handler ended "ok" more than once; at-least-once allows that only after a lease was
// lost, so each such call but the one whose attempt completed the row must have had its lease taken
// back by a rescue (the audit shows the row's token moving on while it ran), and t fails otherwise.
func CheckLostAndDuplicates(t *testing.T, db *pgxpool.Pool, table, ledgerKind string, ids []int64, failed func(id int64) bool) (lost, duplicates int) {
	t.Helper()
	ctx := context.Background()
	indexAudit(t, db)
	rows, err := db.Query(ctx, `SELECT id, processed_at IS NOT NULL, failed_at IS NOT NULL FROM `+pgx.Identifier{table}.Sanitize()+
		` WHERE id = ANY ($1)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	type end struct{ processed, failed bool }
	ends := map[int64]end{}
	var id int64
	var e end
	if _, err := pgx.ForEachRow(rows, []any{&id, &e.processed, &e.failed}, func() error { ends[id] = e; return nil }); err != nil {
		t.Fatal(err)
	}
	report := NewFailureLog(t, table+": jobs lost")
	for _, id := range ids {
		e, ok := ends[id]
		wantFailed := failed != nil && failed(id)
		if !ok || (wantFailed && !e.failed) || (!wantFailed && !e.processed) {
			lost++
			report.Errorf("%s job %d: %+v (in the table: %v), want it %s", table, id, e, ok, map[bool]string{true: "failed", false: "processed"}[wantFailed])
		}
	}
	report.Done()

	// Every "ok" call of a job with more than one, and whether its attempt completed the row or lost
	// its lease to a rescue.
	rows, err = db.Query(ctx, `WITH ok AS (
		SELECT l.job_id, l.token, l.node FROM mp_ledger l JOIN unnest($3::bigint[]) AS u(id) ON u.id = l.job_id
		WHERE l.kind IS NOT DISTINCT FROM $2 AND l.outcome = 'ok'),
	dup AS (SELECT job_id FROM ok GROUP BY job_id HAVING count(*) > 1)
	SELECT o.job_id, o.token, o.node,
		EXISTS (SELECT 1 FROM fault_audit a WHERE a.kind = $1 AND a.job_id = o.job_id AND a.old_token = o.token
			AND a.old_state = 'running' AND a.new_state = 'processed' AND a.new_token = a.old_token),
		EXISTS (SELECT 1 FROM fault_audit a WHERE a.kind = $1 AND a.job_id = o.job_id AND a.old_token = o.token
			AND a.old_state = 'running' AND a.new_token > a.old_token)
	FROM ok o JOIN dup USING (job_id) ORDER BY o.job_id, o.token`, table, ledgerKindArg(ledgerKind), ids)
	if err != nil {
		t.Fatal(err)
	}
	type okCall struct {
		job, token         int64
		node               string
		completed, rescued bool
	}
	calls, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (okCall, error) {
		var c okCall
		return c, r.Scan(&c.job, &c.token, &c.node, &c.completed, &c.rescued)
	})
	if err != nil {
		t.Fatal(err)
	}
	byJob := map[int64][]okCall{}
	for _, c := range calls {
		byJob[c.job] = append(byJob[c.job], c)
	}
	unjustified := NewFailureLog(t, table+": duplicates without a lost lease")
	for job, cs := range byJob {
		completed := 0
		for _, c := range cs {
			switch {
			case c.completed:
				completed++
			case !c.rescued:
				unjustified.Errorf("%s job %d ran to ok %d times: the call of token %d (in %s) neither completed the row nor lost its lease to a rescue",
					table, job, len(cs), c.token, c.node)
			}
		}
		if completed != 1 {
			unjustified.Errorf("%s job %d ran to ok %d times, %d of them completed the row; want exactly 1", table, job, len(cs), completed)
		}
	}
	unjustified.Done()
	return lost, len(byJob)
}

// CheckKeyHolders checks from the ledger that no more than limit attempts of the keyed kind's jobs
// of one blog held the key at once, and returns the most that did. An attempt holds its key from its
// handler's start until the handler ended or the attempt's lease was taken back by a rescue (the
// audit's change of its token), whichever came first: a killed worker's handler never ends, and a
// paused one's ends only once it wakes, after its job ran again elsewhere. mp_conc cannot tell
// either apart, and counts them as running on. An attempt that neither ended nor was rescued counts
// as holding its key to the end.
func CheckKeyHolders(t *testing.T, db *pgxpool.Pool, limit int) int {
	t.Helper()
	indexAudit(t, db)
	rows, err := db.Query(context.Background(), `WITH l AS (
		SELECT l.n, l.job_id, l.blog_id, l.token, l.node, l.started_at,
			least(coalesce(l.ended_at, 'infinity'), coalesce((SELECT min(a.at) FROM fault_audit a WHERE a.kind = $1 AND a.job_id = l.job_id
				AND a.old_token = l.token AND a.old_state = 'running' AND a.new_token > a.old_token), 'infinity')) AS held_to
		FROM mp_ledger l WHERE l.kind IS NULL)
	SELECT b.blog_id, b.job_id, b.node, b.started_at, 1 + count(o.n) AS holding, array_agg(o.job_id || ' in ' || o.node) FILTER (WHERE o.n IS NOT NULL)
	FROM l b LEFT JOIN l o ON o.blog_id = b.blog_id AND o.n <> b.n AND o.started_at <= b.started_at AND o.held_to > b.started_at
	GROUP BY b.n, b.blog_id, b.job_id, b.node, b.started_at
	ORDER BY holding DESC, b.started_at LIMIT 10`, KeyedKind)
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	var blog, job int64
	var node string
	var at time.Time
	var holding int
	var others []string
	if _, err := pgx.ForEachRow(rows, []any{&blog, &job, &node, &at, &holding, &others}, func() error {
		most = max(most, holding)
		if holding > limit {
			t.Errorf("blog %d: job %d started in %s at %s while %v held the key: %d at once, want at most %d",
				blog, job, node, at.Format("15:04:05.000000"), others, holding, limit)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return most
}

// indexAudit indexes the audit and the ledger for the checks here, which look both up per job: built
// once the run is over, they cost the run nothing.
func indexAudit(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	for _, stmt := range []string{
		`CREATE INDEX IF NOT EXISTS wf_fault_audit_job ON fault_audit (kind, job_id, old_token)`,
		`CREATE INDEX IF NOT EXISTS mp_ledger_job_token ON mp_ledger (job_id, token)`,
	} {
		if _, err := db.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("indexing the audit: %v", err)
		}
	}
}

// CompletionLatency is the median and 99th percentile of the time from enqueue to completion of table's jobs
// created in [from, to) and processed.
func CompletionLatency(t *testing.T, db *pgxpool.Pool, table string, from, to time.Time) (p50, p99 time.Duration) {
	t.Helper()
	var a, b *float64
	if err := db.QueryRow(context.Background(), `SELECT
		percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM processed_at - created_at)),
		percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM processed_at - created_at))
		FROM `+pgx.Identifier{table}.Sanitize()+` WHERE created_at >= $1 AND created_at < $2 AND processed_at IS NOT NULL`, from, to).Scan(&a, &b); err != nil {
		t.Fatal(err)
	}
	d := func(s *float64) time.Duration {
		if s == nil {
			return 0
		}
		return time.Duration(*s * float64(time.Second))
	}
	return d(a), d(b)
}

// CountRescues counts the audit's rescues of kind's rows: a running row's token taken back.
func CountRescues(t *testing.T, db *pgxpool.Pool, kind, where string, args ...any) int {
	t.Helper()
	return QueryCount(t, db, `SELECT count(*) FROM fault_audit WHERE kind = $1 AND old_state = 'running' AND new_token > old_token`+where,
		append([]any{kind}, args...)...)
}

// ShowString is *s, or "<nil>".
func ShowString(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// LeasedBy counts the leased rows of tables by their lease owner.
func LeasedBy(t *testing.T, db *pgxpool.Pool, tables ...string) map[string]int {
	t.Helper()
	held := map[string]int{}
	for _, table := range tables {
		rows, err := db.Query(context.Background(), `SELECT lease_owner, count(*) FROM `+pgx.Identifier{table}.Sanitize()+`
			WHERE lease_owner IS NOT NULL GROUP BY lease_owner`)
		if err != nil {
			t.Fatal(err)
		}
		var owner string
		var n int
		if _, err := pgx.ForEachRow(rows, []any{&owner, &n}, func() error { held[owner] += n; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return held
}

// AttemptsNotOnePlusRescues counts the jobs of table whose attempts_made is not one plus their
// rescues (the audit's running rows taken back): attempts count as they start, so a job made one per
// lease it held.
func AttemptsNotOnePlusRescues(t *testing.T, db *pgxpool.Pool, table string) int {
	t.Helper()
	return QueryCount(t, db, `SELECT count(*) FROM `+table+` j WHERE j.attempts_made <> 1 + (SELECT count(*) FROM fault_audit a
		WHERE a.kind = $1 AND a.job_id = j.id AND a.old_state = 'running' AND a.new_token > a.old_token)`, table)
}
