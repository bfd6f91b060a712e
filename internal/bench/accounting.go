package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/internal/states"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// pollEvery is how often a scenario looks at its counters while it waits.
const pollEvery = 5 * time.Millisecond

// insert enqueues jobs from to to-1 (their n) with dispatcher.EnqueueMany, Batch jobs per call, on
// the run's own pool; done counts the jobs inserted so far.
func insert[T any](ctx context.Context, s *session, kind *jobinfo.Kind[T], from, to int64, done *atomic.Int64,
	mk func(n int64) T, opts ...dispatcher.EnqueueOption) error {
	batch := make([]T, 0, s.opts.Batch)
	for start := from; start < to; start += int64(s.opts.Batch) {
		batch = batch[:0]
		for n := start; n < min(to, start+int64(s.opts.Batch)); n++ {
			batch = append(batch, mk(n))
		}
		if _, err := dispatcher.EnqueueMany(ctx, s.db, kind, batch, opts...); err != nil {
			return fmt.Errorf("enqueueing jobs %d to %d: %w", start, start+int64(len(batch))-1, err)
		}
		done.Add(int64(len(batch)))
	}
	return nil
}

// load inserts jobs 0 to jobs-1 with progress lines, and records the insert rate.
func load[T any](ctx context.Context, s *session, kind *jobinfo.Kind[T], jobs int64, mk func(n int64) T,
	opts ...dispatcher.EnqueueOption) (time.Duration, error) {
	var done atomic.Int64
	stop := progress(s.opts.Log, s.opts.Progress, s.opts.Scenario+" insert", func() (int64, int64) {
		n := done.Load()
		return n, n
	})
	start := time.Now()
	err := insert(ctx, s, kind, 0, jobs, &done, mk, opts...)
	stop()
	return time.Since(start), err
}

// accounting is what the ledger and the table say about every job of a run.
type accounting struct {
	Jobs       int64   `json:"jobs"`        // enqueued
	Rows       int64   `json:"rows"`        // rows in the table
	Processed  int64   `json:"processed"`   // rows with processed_at
	Failed     int64   `json:"failed"`      // rows with failed_at
	Retried    int64   `json:"retried"`     // rows with more than one attempt
	Duplicates int64   `json:"duplicates"`  // jobs whose handler ran more than once
	Lost       int64   `json:"lost"`        // jobs never run, or not processed in the table
	EarlyDB    int64   `json:"early_db"`    // rows whose started_at is before process_after (database clock)
	EarlyLocal int64   `json:"early_local"` // handler runs that began before process_after (local clock)
	NeverRan   []int64 `json:"never_ran_sample,omitempty"`
}

// early is the jobs that started before their time by either clock.
func (a accounting) early() int64 { return max(a.EarlyDB, a.EarlyLocal) }

// account checks jobs 0 to jobs-1 of the ledger against the kind's table.
func (s *session) account(ctx context.Context, table pgx.Identifier, led *ledger, jobs, earlyLocal int64) (accounting, error) {
	a := accounting{Jobs: jobs, EarlyLocal: earlyLocal}
	t := table.Sanitize()
	var distinct int64
	err := s.db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE `+states.Processed("")+`),
		count(*) FILTER (WHERE `+states.Failed("")+`), count(*) FILTER (WHERE attempts_made > 1),
		count(*) FILTER (WHERE started_at < process_after), count(DISTINCT n) FROM `+t).
		Scan(&a.Rows, &a.Processed, &a.Failed, &a.Retried, &a.EarlyDB, &distinct)
	if err != nil {
		return a, fmt.Errorf("checking the table: %w", err)
	}
	if distinct != a.Rows {
		s.report.fail("the table holds %d rows for %d distinct jobs", a.Rows, distinct)
	}
	var never int64
	a.Duplicates, a.NeverRan, never = led.tally(jobs, 10)
	a.Lost = never
	// Jobs that ran but whose row is not processed are lost too: their outcome was never recorded.
	rows, err := s.db.Query(ctx, "SELECT n FROM "+t+" WHERE processed_at IS NULL")
	if err != nil {
		return a, err
	}
	unprocessed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return a, err
	}
	for _, n := range unprocessed {
		if n >= jobs || led.count(n) > 0 {
			a.Lost++
		}
	}
	return a, nil
}

// record adds the accounting to the report: its RESULT pairs, a table, and a failure for each problem.
func (a accounting) record(r *Report) {
	if a.Duplicates > 0 {
		r.fail("%d jobs ran more than once", a.Duplicates)
	}
	if a.Lost > 0 {
		r.fail("%d jobs were lost (never run, or not processed in the table; first never run: %v)", a.Lost, a.NeverRan)
	}
	if a.early() > 0 {
		r.fail("%d jobs started before their process_after (database clock %d, local clock %d)", a.early(), a.EarlyDB, a.EarlyLocal)
	}
	if a.Rows != a.Jobs {
		r.fail("the table holds %d rows, %d jobs were enqueued", a.Rows, a.Jobs)
	}
	r.Details["accounting"] = a
	r.table(Table{Title: "accounting (handler runs per job, checked against the table)", Header: []string{"check", "value"},
		Rows: [][]string{
			{"jobs enqueued", format(a.Jobs)}, {"rows in the table", format(a.Rows)},
			{"rows processed", format(a.Processed)}, {"rows failed", format(a.Failed)},
			{"rows with more than one attempt", format(a.Retried)},
			{"duplicates (jobs run more than once)", format(a.Duplicates)},
			{"lost (never run, or not processed)", format(a.Lost)},
			{"early (started before process_after: database clock / local clock)", fmt.Sprintf("%d / %d", a.EarlyDB, a.EarlyLocal)},
		}})
}

// resultPairs appends the accounting's RESULT pairs.
func (a accounting) resultPairs(r *Report) {
	r.result("duplicates", a.Duplicates)
	r.result("lost", a.Lost)
	r.result("early", a.early())
}

// accountStopped checks a run that may have stopped before every job ran (fair): jobs 0 to jobs-1
// of the ledger against the table. A job that never ran and whose row still waits (not processed,
// failed or leased) is left over and counted in waiting, not lost, unless mustRun says it had to
// run. Lost is then: a job that ran but whose row is not processed, a job that had to run and never
// did, a row processed or leased whose handler never ran, and a job without a row.
func (s *session) accountStopped(ctx context.Context, table pgx.Identifier, led *ledger, jobs int64,
	mustRun func(n int64) bool) (a accounting, waiting int64, err error) {
	a = accounting{Jobs: jobs}
	rows, err := s.db.Query(ctx, `SELECT n, `+states.Processed("")+`, `+states.Failed("")+`,
		`+states.Running("")+`, attempts_made, coalesce(started_at < process_after, false) FROM `+table.Sanitize())
	if err != nil {
		return a, 0, fmt.Errorf("checking the table: %w", err)
	}
	seen := make([]bool, jobs)
	var n int64
	var processed, failed, leased, early bool
	var attempts int32
	_, err = pgx.ForEachRow(rows, []any{&n, &processed, &failed, &leased, &attempts, &early}, func() error {
		a.Rows++
		if n < 0 || n >= jobs || seen[n] {
			s.report.fail("the table holds a second row, or a row of no enqueued job, for job %d", n)
			return nil
		}
		seen[n] = true
		a.Processed += b2i(processed)
		a.Failed += b2i(failed)
		a.Retried += b2i(attempts > 1)
		a.EarlyDB += b2i(early)
		ran := led.count(n) > 0
		switch {
		case ran != processed, !ran && (failed || leased):
			a.Lost++
		case !ran && mustRun(n):
			a.Lost++
			if len(a.NeverRan) < 10 {
				a.NeverRan = append(a.NeverRan, n)
			}
		case !ran:
			waiting++
		}
		return nil
	})
	if err != nil {
		return a, waiting, fmt.Errorf("checking the table: %w", err)
	}
	for i, ok := range seen {
		if !ok {
			a.Lost++
			if len(a.NeverRan) < 10 && led.count(int64(i)) == 0 {
				a.NeverRan = append(a.NeverRan, int64(i))
			}
		}
	}
	a.Duplicates, _, _ = led.tally(jobs, 0)
	return a, waiting, nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
