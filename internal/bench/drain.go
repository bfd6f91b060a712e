package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
)

// drainTarget is the throughput drain and steady aim for on a 2-core machine, in jobs a second.
const drainTarget = 30_000

// runDrain pre-inserts Jobs no-op jobs of a plain kind, then times the dispatchers working them all.
func runDrain(ctx context.Context, s *session) error {
	o, r := s.opts, s.report
	jobs := int64(o.Jobs)
	kind, err := createKind[plainJob](ctx, s, "bench_drain")
	if err != nil {
		return err
	}
	insertTime, err := load(ctx, s, kind, jobs, func(n int64) plainJob { return plainJob{N: n} })
	if err != nil {
		return err
	}
	if err := s.analyze(ctx, kind.Info().Table, false); err != nil {
		return err
	}
	var led ledger
	s.trace.reset()
	start := time.Now()
	f, err := s.startFleet(ctx, o.Dispatchers[0], "drain", false, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(_ context.Context, j *dispatcher.Job[plainJob]) error {
			led.run(j.Data.N)
			return nil
		})
	})
	if err != nil {
		return err
	}
	defer f.stop(ctx)
	elapsed, acc, cost, err := s.drainFleet(ctx, f, "drain", start, jobs, kind.Info().Table, &led)
	if err != nil {
		return err
	}
	tup, err := s.tupleStats(ctx, "bench_drain")
	if err != nil {
		return err
	}
	perSec := rate(jobs, elapsed)
	r.result("scenario", "drain")
	r.result("jobs", jobs)
	r.result("dispatchers", o.Dispatchers[0])
	r.result("workers", o.Workers)
	r.result("seconds", round(elapsed.Seconds(), 2))
	r.result("jobs_per_s", perSec)
	r.result("insert_jobs_per_s", rate(jobs, insertTime))
	r.result("dead_tuples", tup.DeadTuples)
	cost.resultPairs(r)
	acc.resultPairs(r)
	st := f.stats()
	r.Details["dispatcher_stats"] = st
	r.Details["table"] = tup
	r.table(Table{Title: "drain", Header: []string{"measure", "value", "target / peer"}, Rows: [][]string{
		{"jobs", format(jobs), ""},
		{"insert (EnqueueMany, COPY)", fmt.Sprintf("%.1f s, %.0f jobs/s", insertTime.Seconds(), rate(jobs, insertTime)), ""},
		{"drain time", fmt.Sprintf("%.2f s", elapsed.Seconds()), ""},
		{"drain rate", fmt.Sprintf("%.0f jobs/s", perSec), fmt.Sprintf(">= %d jobs/s; River 15.5k-24.5k", drainTarget)},
		{"claimed / processed / stale finishes", fmt.Sprintf("%d / %d / %d", st.Claimed, st.Processed, st.StaleFinishes), ""},
		{"dead tuples after (n_dead_tup)", format(tup.DeadTuples), "River: 2M after 1M"},
		{"updates (HOT)", fmt.Sprintf("%d (%d)", tup.Updates, tup.HotUpdates), ""},
		{"autovacuum runs during the run", format(tup.Autovacuums), ""},
		{"table size with indexes", fmt.Sprintf("%.1f MiB", float64(tup.TotalBytes)/(1<<20)), ""},
		{"blocks read outside shared_buffers: heap / indexes", fmt.Sprintf("%d of %d / %d of %d",
			tup.HeapRead, tup.HeapRead+tup.HeapHit, tup.IdxRead, tup.IdxRead+tup.IdxHit), "insert and drain"},
	}})
	r.table(cost.table())
	acc.record(r)
	s.statements("dispatchers' statements during the drain (client-side time)")
	return nil
}

// tupleStats is what pg_stat_user_tables says about a kind's table.
type tupleStats struct {
	LiveTuples  int64 `json:"n_live_tup"`
	DeadTuples  int64 `json:"n_dead_tup"`
	Updates     int64 `json:"n_tup_upd"`
	HotUpdates  int64 `json:"n_tup_hot_upd"`
	Autovacuums int64 `json:"autovacuum_count"`
	TotalBytes  int64 `json:"total_bytes"`
	// Block reads during the run (pg_statio_user_tables): hits in shared_buffers, and reads from the
	// kernel (its page cache or the disk), for the heap and all indexes.
	HeapHit  int64 `json:"heap_blks_hit"`
	HeapRead int64 `json:"heap_blks_read"`
	IdxHit   int64 `json:"idx_blks_hit"`
	IdxRead  int64 `json:"idx_blks_read"`
}

// tupleStats reads the table's statistics once the dispatchers' backends have reported theirs:
// PostgreSQL publishes a backend's counts when it goes idle or exits, about once a second.
func (s *session) tupleStats(ctx context.Context, table string) (tupleStats, error) {
	var t tupleStats
	read := func() error {
		return s.db.QueryRow(ctx, `SELECT n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, autovacuum_count,
			pg_total_relation_size(s.relid), coalesce(heap_blks_hit, 0), coalesce(heap_blks_read, 0),
			coalesce(idx_blks_hit, 0), coalesce(idx_blks_read, 0)
			FROM pg_stat_user_tables s JOIN pg_statio_user_tables io USING (relid)
			WHERE s.schemaname = $1 AND s.relname = $2`, s.opts.Schema, table).
			Scan(&t.LiveTuples, &t.DeadTuples, &t.Updates, &t.HotUpdates, &t.Autovacuums, &t.TotalBytes,
				&t.HeapHit, &t.HeapRead, &t.IdxHit, &t.IdxRead)
	}
	prev := int64(-1)
	for range 10 {
		if err := read(); err != nil {
			return t, fmt.Errorf("reading pg_stat_user_tables: %w", err)
		}
		if t.Updates == prev {
			break
		}
		prev = t.Updates
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-time.After(600 * time.Millisecond):
		}
	}
	return t, nil
}
