package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// steady is jobpipe's steady on River: about --backlog jobs kept waiting by a producer while the
// client works for --duration. The rate is the completions during that window; then the producer
// stops, the rest is worked, and every job is accounted for.
func (s *session) steady(ctx context.Context) error {
	target := int64(s.opts.backlog)
	var inserted atomic.Int64
	if err := s.insert(ctx, 0, target, &inserted); err != nil {
		return err
	}
	if err := s.analyze(ctx); err != nil {
		return err
	}
	if err := s.start(ctx); err != nil {
		return err
	}
	var quit atomic.Bool
	produced := make(chan error, 1)
	go func() { produced <- s.produce(ctx, &inserted, target, &quit) }()
	stop := progress(s.log, s.opts.progress, "steady", func() (int64, int64) {
		c := s.completed.Load()
		return c, inserted.Load() - c
	})
	w, werr := s.window(ctx, &inserted)
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
	err := s.waitCompleted(ctx, total)
	stop()
	if err != nil {
		return err
	}
	if err := s.stop(ctx); err != nil {
		return err
	}
	acc, err := s.account(ctx, total)
	if err != nil {
		return err
	}
	r := s.report
	r.result("scenario", "steady")
	r.result("peer", "river")
	r.result("jobs", total)
	r.result("seconds", round(w.elapsed.Seconds(), 2))
	r.result("jobs_per_s", rate(w.processed, w.elapsed))
	r.result("backlog_target", target)
	r.result("backlog_min", w.minBacklog)
	r.result("backlog_mean", w.sumBacklog/max(w.samples, 1))
	acc.record(r, s.unexpected.Load())
	return nil
}

// produce tops the backlog up to target whenever it falls a refill (a tenth of target, at most one
// insert batch) below it, until quit, as jobpipe's steady does. It checks quit only between top-ups,
// so a top-up is never half-inserted when the run stops producing.
func (s *session) produce(ctx context.Context, inserted *atomic.Int64, target int64, quit *atomic.Bool) error {
	refill := max(1, min(insertBatch, target/10))
	for !quit.Load() {
		n := inserted.Load()
		backlog := n - s.completed.Load()
		if backlog > target-refill {
			time.Sleep(time.Millisecond)
			continue
		}
		if err := s.insert(ctx, n, n+target-backlog, inserted); err != nil {
			return err
		}
	}
	return nil
}

// steadyWindow is what happened during the measured window.
type steadyWindow struct {
	elapsed                time.Duration
	processed              int64
	minBacklog, sumBacklog int64
	samples                int64
}

// window waits --duration, sampling the backlog every 50 ms, and counts the completions meanwhile.
func (s *session) window(ctx context.Context, inserted *atomic.Int64) (*steadyWindow, error) {
	w := &steadyWindow{minBacklog: 1 << 62}
	start, c0 := time.Now(), s.completed.Load()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for time.Since(start) < s.opts.duration {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("interrupted during the window: %w", context.Cause(ctx))
		case <-t.C:
		}
		b := inserted.Load() - s.completed.Load()
		w.minBacklog = min(w.minBacklog, b)
		w.sumBacklog += b
		w.samples++
	}
	w.elapsed, w.processed = time.Since(start), s.completed.Load()-c0
	return w, nil
}
