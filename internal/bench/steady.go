package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// runSteady keeps about Backlog jobs waiting while the dispatchers work for Duration: a producer
// inserts a batch whenever the backlog is below target. The rate is what was processed during the
// window; then the producer stops, the rest is drained, and every job is accounted for.
func runSteady(ctx context.Context, s *session) error {
	o, r := s.opts, s.report
	kind, err := createKind[plainJob](ctx, s, "bench_steady")
	if err != nil {
		return err
	}
	target := int64(o.Backlog)
	var inserted atomic.Int64
	if err := insert(ctx, s, kind, 0, target, &inserted, newPlainJob); err != nil {
		return err
	}
	if err := s.analyze(ctx, kind.Info().Table, false); err != nil {
		return err
	}
	var led ledger
	s.trace.reset()
	f, err := s.startFleet(ctx, o.Dispatchers[0], "steady", false, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(_ context.Context, j *dispatcher.Job[plainJob]) error {
			led.run(j.Data.N)
			return nil
		})
	})
	if err != nil {
		return err
	}
	defer f.stop(ctx)
	var quit atomic.Bool
	produced := make(chan error, 1)
	go func() { produced <- s.produce(ctx, kind, f, &inserted, target, &quit) }()
	stop := progress(o.Log, o.Progress, "steady", func() (int64, int64) {
		p := f.processed()
		return p, inserted.Load() - p
	})
	w, werr := s.window(ctx, f, &inserted)
	quit.Store(true)
	if err := <-produced; err != nil {
		stop()
		return err
	}
	if werr != nil {
		stop()
		return werr
	}
	total := inserted.Load()
	drainStart := time.Now()
	err = s.waitProcessed(ctx, f, total)
	stop()
	if err != nil {
		return err
	}
	drainTime := time.Since(drainStart)
	if err := f.stop(ctx); err != nil {
		return err
	}
	acc, err := s.account(ctx, kind.Info().Table, &led, total, 0)
	if err != nil {
		return err
	}
	perSec := rate(w.processed, w.elapsed)
	r.result("scenario", "steady")
	r.result("jobs", total)
	r.result("seconds", round(w.elapsed.Seconds(), 2))
	r.result("jobs_per_s", perSec)
	r.result("backlog_target", target)
	r.result("backlog_min", w.minBacklog)
	r.result("backlog_mean", w.meanBacklog())
	acc.resultPairs(r)
	r.Details["dispatcher_stats"] = f.stats()
	r.Details["window"] = map[string]any{"processed": w.processed, "inserted": w.inserted, "seconds": w.elapsed.Seconds(),
		"backlog_min": w.minBacklog, "backlog_max": w.maxBacklog, "backlog_mean": w.meanBacklog()}
	r.table(Table{Title: "steady", Header: []string{"measure", "value", "target / peer"}, Rows: [][]string{
		{"window", fmt.Sprintf("%.1f s", w.elapsed.Seconds()), ""},
		{"processed in the window", fmt.Sprintf("%d (%.0f jobs/s)", w.processed, perSec), fmt.Sprintf(">= %d jobs/s; River 19.3k-23.9k", drainTarget)},
		{"inserted in the window", fmt.Sprintf("%d (%.0f jobs/s)", w.inserted, rate(w.inserted, w.elapsed)), ""},
		{"backlog min / mean / max", fmt.Sprintf("%d / %d / %d", w.minBacklog, w.meanBacklog(), w.maxBacklog), fmt.Sprintf("~%d", target)},
		{"final drain after the window", fmt.Sprintf("%.1f s", drainTime.Seconds()), ""},
	}})
	acc.record(r)
	s.statements("dispatchers' statements during the window and the final drain (client-side time)")
	return nil
}

func newPlainJob(n int64) plainJob { return plainJob{N: n} }

// produce tops the backlog up to target whenever it falls a refill (a tenth of target, at most Batch)
// below it, until quit: batches of thousands, as an application enqueueing in bulk would send, not a
// trickle of tiny ones. It checks quit only between batches, so a batch is never half-inserted when
// the run stops producing.
func (s *session) produce(ctx context.Context, kind *jobinfo.Kind[plainJob], f *fleet, inserted *atomic.Int64, target int64, quit *atomic.Bool) error {
	refill := max(1, min(int64(s.opts.Batch), target/10))
	for !quit.Load() {
		n := inserted.Load()
		backlog := n - f.processed()
		if backlog > target-refill {
			time.Sleep(time.Millisecond)
			continue
		}
		if err := insert(ctx, s, kind, n, n+target-backlog, inserted, newPlainJob); err != nil {
			return err
		}
	}
	return nil
}

// steadyWindow is what happened during the measured window.
type steadyWindow struct {
	elapsed                          time.Duration
	processed, inserted              int64
	minBacklog, maxBacklog, sumBacks int64
	samples                          int64
}

func (w *steadyWindow) meanBacklog() int64 { return w.sumBacks / max(w.samples, 1) }

// window waits Duration, sampling the backlog, and counts what was processed and inserted meanwhile.
func (s *session) window(ctx context.Context, f *fleet, inserted *atomic.Int64) (*steadyWindow, error) {
	w := &steadyWindow{minBacklog: 1 << 62}
	start, p0, i0 := time.Now(), f.processed(), inserted.Load()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for time.Since(start) < s.opts.Duration {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("interrupted during the window: %w", context.Cause(ctx))
		case <-t.C:
		}
		b := inserted.Load() - f.processed()
		w.minBacklog, w.maxBacklog = min(w.minBacklog, b), max(w.maxBacklog, b)
		w.sumBacks += b
		w.samples++
	}
	w.elapsed, w.processed, w.inserted = time.Since(start), f.processed()-p0, inserted.Load()-i0
	return w, nil
}
