package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// accounting is what the ledger and river_job say about every job of a run, as jobpipe's bench
// checks its own tables.
type accounting struct {
	jobs, rows, completed, failed, retried int64
	duplicates, lost, early                int64
	neverRan                               []int64
}

// account checks jobs 0 to jobs-1 of the ledger against river_job, once the client has stopped.
func (s *session) account(ctx context.Context, jobs int64) (accounting, error) {
	a := accounting{jobs: jobs}
	var distinct int64
	// early: a job fetched before its scheduled_at, both on the database's clock.
	err := s.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'completed'),
		count(*) FILTER (WHERE state IN ('discarded', 'cancelled', 'retryable')), count(*) FILTER (WHERE attempt > 1),
		count(*) FILTER (WHERE attempted_at < scheduled_at), count(DISTINCT args->'n') FROM river_job`).
		Scan(&a.rows, &a.completed, &a.failed, &a.retried, &a.early, &distinct)
	if err != nil {
		return a, fmt.Errorf("checking river_job: %w", err)
	}
	if distinct != a.rows {
		s.report.fail("river_job holds %d rows for %d distinct jobs", a.rows, distinct)
	}
	for n := range jobs {
		switch c := s.led.count(n); {
		case c > 1:
			a.duplicates++
		case c == 0:
			a.lost++
			if len(a.neverRan) < 10 {
				a.neverRan = append(a.neverRan, n)
			}
		}
	}
	// Jobs that ran but whose row is not completed are lost too: their outcome was never recorded.
	rows, err := s.pool.Query(ctx, "SELECT (args->>'n')::bigint FROM river_job WHERE state <> 'completed'")
	if err != nil {
		return a, err
	}
	unfinished, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return a, err
	}
	for _, n := range unfinished {
		if n >= jobs || s.led.count(n) > 0 {
			a.lost++
		}
	}
	return a, nil
}

// record adds the accounting's RESULT pairs and a failure for each problem.
func (a accounting) record(r *report, unexpectedEvents int64) {
	r.result("duplicates", a.duplicates)
	r.result("lost", a.lost)
	r.result("early", a.early)
	if a.duplicates > 0 {
		r.fail("%d jobs ran more than once", a.duplicates)
	}
	if a.lost > 0 {
		r.fail("%d jobs were lost (never run, or not completed in river_job; first never run: %v)", a.lost, a.neverRan)
	}
	if a.early > 0 {
		r.fail("%d jobs were fetched before their scheduled_at", a.early)
	}
	if a.rows != a.jobs || a.completed != a.jobs {
		r.fail("river_job holds %d rows, %d completed; %d jobs were inserted", a.rows, a.completed, a.jobs)
	}
	if a.failed > 0 || unexpectedEvents > 0 {
		r.fail("%d jobs failed or were cancelled (%d events)", a.failed, unexpectedEvents)
	}
	r.setting("rows_completed", a.completed)
	r.setting("rows_with_more_than_one_attempt", a.retried)
}

// deadTuples is river_job's n_dead_tup once the workers' backends have reported their counts:
// PostgreSQL publishes a backend's counts when it goes idle or exits, about once a second.
func (s *session) deadTuples(ctx context.Context) (int64, error) {
	var dead, updates int64
	prev := int64(-1)
	for range 10 {
		err := s.pool.QueryRow(ctx, `SELECT n_dead_tup, n_tup_upd FROM pg_stat_user_tables
			WHERE schemaname = $1 AND relname = 'river_job'`, s.opts.schema).Scan(&dead, &updates)
		if err != nil {
			return 0, fmt.Errorf("reading pg_stat_user_tables: %w", err)
		}
		if updates == prev {
			break
		}
		prev = updates
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(600 * time.Millisecond):
		}
	}
	return dead, nil
}
