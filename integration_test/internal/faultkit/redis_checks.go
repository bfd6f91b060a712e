package faultkit

// The checks every Redis and network scenario ends with: each kind's jobs against their rows, the
// ledger and the audit, once the workers are stopped and have left nothing behind.

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/dispatcher"
)

// KindJobs is what a scenario enqueued of one kind, for CheckJobs.
type KindJobs struct {
	Table      string             // the kind's table
	LedgerKind string             // its calls' kind in the ledger, "" for the keyed kind
	Keyed      bool               // a blog's jobs must run one at a time, in seq order
	Jobs       map[int64]KeyedJob // by id: blog and seq as enqueued (the ledger's blog for other kinds)
}

// JobFigures is what CheckJobs counted.
type JobFigures struct {
	Jobs, Calls int
	Lost        int // jobs not processed (failed or never finished)
	Duplicates  int // jobs whose handler ended ok more than once
	LeaseLost   int // calls ended because their lease was lost
	// StaleOverlaps counts calls of a key that ran beside a call whose token a rescue had taken back
	// (proven lease loss); such calls are exempt from the key's one-at-a-time check.
	StaleOverlaps int
}

// CheckJobs checks the jobs of one kind against their rows, the ledger and the audit:
//   - lost = 0: every job processed, none failed;
//   - a job's handler ended ok more than once only after a proven lease loss: each ok call but the one
//     holding the row's final token had its token taken back by a rescue (fault_audit), so that its
//     finish could change nothing;
//   - every call ended (nothing stays stuck once the fault has healed), and belongs to an enqueued job
//     with the enqueued blog and seq;
//   - for a keyed kind, per blog: calls start in seq order, and never two at once, except beside a
//     call whose token a rescue had taken back (a stale holder, counted in StaleOverlaps).
func (e *RedisWorld) CheckJobs(t *testing.T, k KindJobs) JobFigures {
	t.Helper()
	ctx := context.Background()
	fig := JobFigures{Jobs: len(k.Jobs)}
	type rowState struct {
		processed, failed bool
		token             int64
	}
	rows, err := e.DB.Query(ctx, `SELECT id, processed_at IS NOT NULL, failed_at IS NOT NULL, lock_token FROM `+pgx.Identifier{k.Table}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	state := map[int64]rowState{}
	var id int64
	var st rowState
	if _, err := pgx.ForEachRow(rows, []any{&id, &st.processed, &st.failed, &st.token}, func() error {
		state[id] = st
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	type jobToken struct{ job, token int64 }
	rescued := map[jobToken]time.Time{}
	rows, err = e.DB.Query(ctx, `SELECT job_id, old_token, at FROM fault_audit
		WHERE kind = $1 AND old_state = 'running' AND new_state <> 'running' AND new_token > old_token`, k.Table)
	if err != nil {
		t.Fatal(err)
	}
	var jt jobToken
	var at time.Time
	if _, err := pgx.ForEachRow(rows, []any{&jt.job, &jt.token, &at}, func() error {
		rescued[jt] = at
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	report := NewFailureLog(t, k.Table)
	defer report.Done()
	var calls []Call
	lo, hi := int64(0), int64(RedisPlainBlogBase)
	switch k.LedgerKind {
	case RedisPlainKind:
		lo, hi = RedisPlainBlogBase, ProbeBlogBase
	case ProbeKind:
		lo, hi = ProbeBlogBase, 1<<62
	}
	for _, m := range e.Ledger(t) {
		if m.BlogID >= lo && m.BlogID < hi {
			calls = append(calls, m)
		}
	}
	fig.Calls = len(calls)
	ok := map[int64][]Call{}
	for _, m := range calls {
		want, known := k.Jobs[m.JobID]
		switch {
		case !known:
			report.Errorf("%s: the ledger names job %d, which was never enqueued: %v", k.Table, m.JobID, m)
		case m.BlogID != want.BlogID || m.Seq != want.Seq:
			report.Errorf("%s: job %d ran as blog %d seq %d, enqueued as blog %d seq %d", k.Table, m.JobID, m.BlogID, m.Seq, want.BlogID, want.Seq)
		case m.EndedAt == nil || m.Outcome == nil:
			report.Errorf("%s: a handler call never ended: %v", k.Table, m)
		case *m.Outcome == "ok":
			ok[m.JobID] = append(ok[m.JobID], m)
		case LeaseLost(m):
			fig.LeaseLost++
		}
	}
	for id := range k.Jobs {
		s, found := state[id]
		if !found || !s.processed || s.failed {
			fig.Lost++
			report.Errorf("%s: job %d lost: row %+v (found %v), %d ok calls", k.Table, id, s, found, len(ok[id]))
			continue
		}
		if len(ok[id]) > 1 {
			fig.Duplicates++
			for _, m := range ok[id] {
				if _, proven := rescued[jobToken{id, m.Token}]; m.Token != s.token && !proven {
					report.Errorf("%s: job %d ran to ok more than once, and %v's token was never taken back: no proven lease loss", k.Table, id, m)
				}
			}
		}
	}
	if !k.Keyed {
		return fig
	}
	byBlog := map[int64][]Call{}
	for _, m := range calls {
		byBlog[m.BlogID] = append(byBlog[m.BlogID], m)
	}
	for blog, ms := range byBlog {
		sort.SliceStable(ms, func(i, j int) bool { return ms[i].StartedAt.Before(ms[j].StartedAt) })
		var holder *Call // the latest call not known stale
		for i := range ms {
			m := &ms[i]
			if i > 0 && m.Seq < ms[i-1].Seq {
				report.Errorf("%s: blog %d: %v started after %v, against seq order", k.Table, blog, *m, ms[i-1])
			}
			_, stale := rescued[jobToken{m.JobID, m.Token}]
			for _, o := range ms[:i] {
				if o.EndedAt == nil || o.EndedAt.After(m.StartedAt) {
					if _, oStale := rescued[jobToken{o.JobID, o.Token}]; oStale || stale {
						fig.StaleOverlaps++
					}
				}
			}
			if stale {
				continue
			}
			if holder != nil && (holder.EndedAt == nil || !holder.EndedAt.Before(m.StartedAt)) {
				report.Errorf("%s: blog %d: two calls holding their lease ran at once: %v and %v", k.Table, blog, *holder, *m)
			}
			holder = m
		}
	}
	return fig
}

// WaitProcessed waits until every job of ids is processed in table. After within it fails t with the
// states of the jobs still not processed.
func (e *RedisWorld) WaitProcessed(t *testing.T, table string, ids map[int64]KeyedJob, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	list := make([]int64, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	tbl := pgx.Identifier{table}.Sanitize()
	deadline := time.Now().Add(within)
	for {
		var n int
		if err := e.DB.QueryRow(ctx, `SELECT count(*) FROM `+tbl+` WHERE id = ANY ($1) AND processed_at IS NOT NULL`, list).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == len(list) {
			return
		}
		if time.Now().After(deadline) {
			rows, err := e.DB.Query(ctx, `SELECT format('job %s: attempts %s, token %s, due %s, lease %s by %s, failed %s, last error %s',
				id, attempts_made, lock_token, process_after, lease_expires_at, lease_owner, failed_at, last_error)
				FROM `+tbl+` WHERE id = ANY ($1) AND processed_at IS NULL ORDER BY id LIMIT 5`, list)
			if err != nil {
				t.Fatal(err)
			}
			some, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			t.Fatalf("after %v, %d of the %d jobs of %s are not processed; the first: %v (now %v)", within, len(list)-n, len(list), table, some, e.Now(t))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// MergeJobs returns the union of job sets.
func MergeJobs(sets ...map[int64]KeyedJob) map[int64]KeyedJob {
	out := map[int64]KeyedJob{}
	for _, s := range sets {
		for id, j := range s {
			out[id] = j
		}
	}
	return out
}

// Finish ends a scenario once its fault has healed: it waits until every job of kinds is processed,
// stops the workers with SIGTERM (each must exit 0 within 10 s), checks that they left nothing leased or
// locked (CheckQuiet), then runs CheckJobs and CheckAudit (each job completed exactly once) on each
// kind, and the keyed kind's claim order (CheckOrder). It returns
// the workers' summed stats and each kind's figures, in the order of kinds.
func (e *RedisWorld) Finish(t *testing.T, workers []*Worker, kinds ...KindJobs) (dispatcher.Stats, []JobFigures) {
	t.Helper()
	for _, k := range kinds {
		e.WaitProcessed(t, k.Table, k.Jobs, 60*time.Second)
	}
	CheckAliveDuring(t, "the scenario", workers...)
	Terminate(t, workers...)
	e.CheckQuiet(t)
	var figs []JobFigures
	for _, k := range kinds {
		figs = append(figs, e.CheckJobs(t, k))
		if a := CheckAudit(t, e.DB, k.Table, k.LedgerKind); a.Completions != len(k.Jobs) {
			t.Errorf("%s: %d completions audited for %d jobs, want one each", k.Table, a.Completions, len(k.Jobs))
		}
	}
	e.CheckOrder(t)
	return SumStats(t, workers), figs
}
