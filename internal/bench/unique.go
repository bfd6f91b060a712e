package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
)

// uniqueTargets are the throughputs unique aims for, in jobs a second, by Redis node count.
var uniqueTargets = map[int]int{1: 15_000, 3: 10_000}

// keyWatch checks, as the handlers see it, that no two jobs of a key run at once and that each key's
// jobs start in order.
type keyWatch struct {
	running    []atomic.Int32
	last       []atomic.Int64 // the last Seq started, per key
	maxRunning atomic.Int32
	outOfOrder atomic.Int64
}

func newKeyWatch(keys int) *keyWatch {
	w := &keyWatch{running: make([]atomic.Int32, keys), last: make([]atomic.Int64, keys)}
	for i := range w.last {
		w.last[i].Store(-1)
	}
	return w
}

func (w *keyWatch) enter(j keyedJob) {
	n := w.running[j.K].Add(1)
	for m := w.maxRunning.Load(); n > m && !w.maxRunning.CompareAndSwap(m, n); m = w.maxRunning.Load() {
	}
	if prev := w.last[j.K].Swap(j.Seq); prev >= j.Seq {
		w.outOfOrder.Add(1)
	}
}

func (w *keyWatch) leave(j keyedJob) { w.running[j.K].Add(-1) }

// runUnique works Jobs jobs over Keys keys of a keyed kind (one job per key at a time, through
// redsync), checking mutual exclusion and order per key besides the accounting.
func runUnique(ctx context.Context, s *session) error {
	o, r := s.opts, s.report
	jobs, keys := int64(o.Jobs), int64(min(o.Keys, o.Jobs))
	kind, err := createKind[keyedJob](ctx, s, "bench_unique")
	if err != nil {
		return err
	}
	insertTime, err := load(ctx, s, kind, jobs, func(n int64) keyedJob { return keyedJobFor(n, keys) })
	if err != nil {
		return err
	}
	if err := s.prepareKeyed(ctx, kind.Info()); err != nil {
		return err
	}
	var led ledger
	w := newKeyWatch(int(keys))
	s.trace.reset()
	start := time.Now()
	f, err := s.startFleet(ctx, o.Dispatchers[0], "unique", true, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(_ context.Context, j *dispatcher.Job[keyedJob]) error {
			w.enter(j.Data)
			led.run(j.Data.N)
			w.leave(j.Data)
			return nil
		})
	})
	if err != nil {
		return err
	}
	defer f.stop(ctx)
	elapsed, acc, cost, err := s.drainFleet(ctx, f, "unique", start, jobs, kind.Info().Table, &led)
	if err != nil {
		return err
	}
	leftover, err := s.redis.leftover(ctx)
	if err != nil {
		return err
	}
	if w.maxRunning.Load() > 1 {
		r.fail("up to %d jobs of one key ran at once; the limit is 1", w.maxRunning.Load())
	}
	if w.outOfOrder.Load() > 0 {
		r.fail("%d jobs started before an earlier job of their key", w.outOfOrder.Load())
	}
	st, h := f.stats(), s.redis.hook
	perSec := rate(jobs, elapsed)
	r.result("scenario", "unique")
	r.result("jobs", jobs)
	r.result("keys", keys)
	r.result("redis_nodes", len(s.redis.nodes))
	r.result("dispatchers", o.Dispatchers[0])
	r.result("workers", o.Workers)
	r.result("seconds", round(elapsed.Seconds(), 2))
	r.result("jobs_per_s", perSec)
	r.result("max_per_key", w.maxRunning.Load())
	r.result("out_of_order", w.outOfOrder.Load())
	r.result("lock_taken", h.setNXTaken.Load())
	r.result("released", st.Released)
	cost.resultPairs(r)
	acc.resultPairs(r)
	r.Details["dispatcher_stats"] = st
	r.Details["redis"] = map[string]any{"set_nx": h.setNX.Load(), "set_nx_taken": h.setNXTaken.Load(),
		"scripts": h.scripts.Load(), "pipelines": h.pipelines.Load(), "sent_alone": h.alone.Load(), "errors": h.errs.Load(), "set_nx_seconds": time.Duration(h.setNXTime.Load()).Seconds(),
		"script_seconds": time.Duration(h.scriptTime.Load()).Seconds(), "leftover_keys": leftover}
	target := fmt.Sprintf(">= %d jobs/s", uniqueTargets[len(s.redis.nodes)])
	if _, ok := uniqueTargets[len(s.redis.nodes)]; !ok {
		target = "no target for this node count"
	}
	r.table(Table{Title: "unique", Header: []string{"measure", "value", "target"}, Rows: [][]string{
		{"jobs / keys / Redis nodes", fmt.Sprintf("%d / %d / %d", jobs, keys, len(s.redis.nodes)), ""},
		{"insert (EnqueueMany, COPY)", fmt.Sprintf("%.1f s, %.0f jobs/s", insertTime.Seconds(), rate(jobs, insertTime)), ""},
		{"work time", fmt.Sprintf("%.2f s", elapsed.Seconds()), ""},
		{"rate", fmt.Sprintf("%.0f jobs/s", perSec), target},
		{"most jobs of one key running at once", format(w.maxRunning.Load()), "1"},
		{"jobs started out of their key's order", format(w.outOfOrder.Load()), "0"},
		{"claimed / processed / released (no exec lock)", fmt.Sprintf("%d / %d / %d", st.Claimed, st.Processed, st.Released), ""},
		{"claims refused by the database / leases lost", fmt.Sprintf("%d / %d", st.ClaimsRefused, st.LeasesLost), "0 / 0"},
		{"claim passes that went on without pausing the finishes", format(st.PausesMissed), "0"},
		{"key runs ended, by why", keyRunsEnded(st), ""},
		{"SET NX sent to nodes / refused (taken)", fmt.Sprintf("%d / %d", h.setNX.Load(), h.setNXTaken.Load()), ""},
		{"release/extend scripts sent to nodes", format(h.scripts.Load()), ""},
		{"round trips that carried them: pipelines / commands alone", fmt.Sprintf("%d / %d", h.pipelines.Load(), h.alone.Load()), ""},
		{"Redis time: SET NX / scripts (sum over calls)", fmt.Sprintf("%.1f s / %.1f s",
			time.Duration(h.setNXTime.Load()).Seconds(), time.Duration(h.scriptTime.Load()).Seconds()), ""},
		{"Redis command errors", format(h.errs.Load()), "0"},
		{"lock keys left in Redis after Stop", format(leftover), "0"},
	}})
	r.table(cost.table())
	acc.record(r)
	s.statements("dispatchers' statements during the run (client-side time)")
	return nil
}
