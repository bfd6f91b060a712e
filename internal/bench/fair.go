package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// fairBig is the big key's index in fair's slotWatch; small key i is i+1.
const fairBig = 0

// fairWatch is what fair's handlers record besides the slotWatch: when each small job started (from
// the dispatchers' start, and from its enqueue), how many big jobs had started by the last small
// start, and when the small jobs were all done.
type fairWatch struct {
	start      time.Time
	smallStart []atomic.Int64 // since start, ns; 0 until the job starts
	smallEnq   []atomic.Int64 // since the job's created_at (database clock), ns
	bigStarted atomic.Int64
	bigEnded   atomic.Int64
	smallEnded atomic.Int64

	mu             sync.Mutex
	lastSmall      time.Time
	bigBeforeLast  int64 // big jobs started when the last small job started
	lastSmallEnded time.Time
}

func (w *fairWatch) startSmall(i int, now, created time.Time) {
	w.smallStart[i].CompareAndSwap(0, max(1, int64(now.Sub(w.start))))
	w.smallEnq[i].CompareAndSwap(0, max(1, int64(now.Sub(created))))
	big := w.bigStarted.Load()
	w.mu.Lock()
	if now.After(w.lastSmall) {
		w.lastSmall, w.bigBeforeLast = now, big
	}
	w.mu.Unlock()
}

func (w *fairWatch) endSmall(now time.Time) {
	w.mu.Lock()
	if now.After(w.lastSmallEnded) {
		w.lastSmallEnded = now
	}
	w.mu.Unlock()
	w.smallEnded.Add(1)
}

// runFair measures head-of-line blocking: BigJobs jobs of one key are enqueued first, then one job
// of each of SmallKeys keys, and the dispatchers start once all are waiting. The big key can only
// ever hold KeyLimit slots, so a fair dispatcher starts the small jobs within its first passes
// instead of after the big key's backlog. The run stops Tail after the last small job is done (or,
// with Drain, once the big key's backlog is done too) and accounts for every job.
func runFair(ctx context.Context, s *session) error {
	o := s.opts
	big, small := int64(o.BigJobs), int64(o.SmallKeys)
	jobs := big + small
	kind, err := createKind[fairJob](ctx, s, "bench_fair", jobinfo.KeyLimit(o.KeyLimit))
	if err != nil {
		return err
	}
	insertTime, err := load(ctx, s, kind, jobs, func(n int64) fairJob {
		if n < big {
			return fairJob{K: "big", N: n}
		}
		return fairJob{K: fmt.Sprintf("small-%d", n-big), N: n}
	})
	if err != nil {
		return err
	}
	if err := s.prepareKeyed(ctx, kind.Info()); err != nil {
		return err
	}
	queued := make([]int64, small+1)
	for i := range queued {
		queued[i] = 1
	}
	queued[fairBig] = big
	sw := newSlotWatch(o.KeyLimit, queued)
	fw := &fairWatch{smallStart: make([]atomic.Int64, small), smallEnq: make([]atomic.Int64, small)}
	var led ledger
	s.trace.reset()
	fw.start = time.Now()
	f, err := s.startFleet(ctx, o.Dispatchers[0], "fair", true, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[fairJob]) error {
			n := j.Data.N
			if n < big {
				sw.enter(fairBig)
				fw.bigStarted.Add(1)
				defer func() { sw.leave(fairBig); fw.bigEnded.Add(1) }()
			} else {
				fw.startSmall(int(n-big), sw.enter(int(n-big)+1), j.CreatedAt)
				defer func() { fw.endSmall(sw.leave(int(n-big) + 1)) }()
			}
			led.run(n)
			return sleepCtx(ctx, o.Handler)
		})
	})
	if err != nil {
		return err
	}
	defer f.stop(ctx)
	stop := progress(o.Log, o.Progress, "fair", func() (int64, int64) {
		p := f.processed()
		return p, jobs - p
	})
	err = s.waitCount(ctx, "small jobs to be done", small, fw.smallEnded.Load)
	if err == nil && o.Drain {
		err = s.waitProcessed(ctx, f, jobs)
	} else if err == nil {
		err = sleepCtx(ctx, o.Tail)
	}
	elapsed, bigDone := time.Since(fw.start), fw.bigEnded.Load()
	stop()
	if err != nil {
		return err
	}
	if err := f.stop(ctx); err != nil {
		return err
	}
	acc, waiting, err := s.accountStopped(ctx, kind.Info().Table, &led, jobs, func(n int64) bool { return o.Drain || n >= big })
	if err != nil {
		return err
	}
	s.recordFair(fairRun{big: big, small: small, insert: insertTime, elapsed: elapsed, bigDone: bigDone, waiting: waiting,
		fw: fw, bigSlots: sw.summary(fairBig, fairBig+1), smallSlots: sw.summary(1, int(small)+1), stats: f.stats(), acc: acc})
	return nil
}

// fairRun is what runFair measured, for its report.
type fairRun struct {
	big, small, bigDone, waiting int64
	insert, elapsed              time.Duration
	fw                           *fairWatch
	bigSlots, smallSlots         slotSummary
	stats                        dispatcher.Stats
	acc                          accounting
}

// sortedDurations returns the recorded durations (ns, 0 for none) that are set, sorted, and how many
// were not.
func sortedDurations(xs []atomic.Int64) (ds []time.Duration, missing int) {
	for i := range xs {
		if v := xs[i].Load(); v > 0 {
			ds = append(ds, time.Duration(v))
		} else {
			missing++
		}
	}
	slices.Sort(ds)
	return ds, missing
}

// pctMs is the p-th percentile of sorted in milliseconds, 0 when empty.
func pctMs(sorted []time.Duration, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return ms(pct(sorted, p))
}

func (s *session) recordFair(m fairRun) {
	o, r := s.opts, s.report
	starts, missing := sortedDurations(m.fw.smallStart)
	enq, _ := sortedDurations(m.fw.smallEnq)
	if m.smallSlots.OverLimit > 0 {
		r.fail("%d handler starts found their key running more than its limit of %d (big key: most %d at once)",
			m.smallSlots.OverLimit, o.KeyLimit, m.bigSlots.MaxPerKey)
	}
	smallDone := m.fw.lastSmallEnded.Sub(m.fw.start)
	bigRate := rate(m.bigDone, m.elapsed)
	lockFailed := int64(m.stats.Locks.Taken + m.stats.Locks.Unavailable)
	r.result("scenario", "fair")
	r.result("big_jobs", m.big)
	r.result("small_keys", m.small)
	r.result("key_limit", o.KeyLimit)
	r.result("dispatchers", o.Dispatchers[0])
	r.result("workers", o.Workers)
	r.result("small_start_p50_ms", pctMs(starts, 50))
	r.result("small_start_p99_ms", pctMs(starts, 99))
	r.result("small_start_max_ms", pctMs(starts, 100))
	r.result("big_started_before_last_small", m.fw.bigBeforeLast)
	r.result("small_done_s", round(smallDone.Seconds(), 3))
	r.result("seconds", round(m.elapsed.Seconds(), 2))
	r.result("big_done", m.bigDone)
	r.result("big_left", m.waiting)
	r.result("big_jobs_per_s", bigRate)
	r.result("big_max_running", m.bigSlots.MaxPerKey)
	r.result("over_limit", m.smallSlots.OverLimit)
	r.result("big_slot_wait_p50_ms", m.bigSlots.waitMs(50))
	r.result("big_slot_wait_p99_ms", m.bigSlots.waitMs(99))
	r.result("lock_failed", lockFailed)
	m.acc.resultPairs(r)
	r.Details["dispatcher_stats"] = m.stats
	r.Details["big_key"] = m.bigSlots
	drainEst := "drained (--drain)"
	if !o.Drain {
		drainEst = "n/a: nothing of the big key finished"
		if bigRate > 0 {
			drainEst = fmt.Sprintf("%.0f s at %.0f jobs/s (the run stopped before; --drain measures it)", float64(m.big)/bigRate, bigRate)
		}
	}
	r.table(Table{Title: "fair", Header: []string{"measure", "value", "a fair dispatcher"}, Rows: [][]string{
		{"big key backlog / small keys (one job each) / limit per key", fmt.Sprintf("%d / %d / %d", m.big, m.small, o.KeyLimit), ""},
		{"insert (EnqueueMany, COPY; big key first)", fmt.Sprintf("%.1f s, %.0f jobs/s", m.insert.Seconds(), rate(m.big+m.small, m.insert)), ""},
		{"handler", o.Handler.String(), ""},
		{"small jobs: dispatchers' start -> start p50 / p99 / max", fmt.Sprintf("%.2f / %.2f / %.2f ms", pctMs(starts, 50), pctMs(starts, 99), pctMs(starts, 100)),
			"within the first passes"},
		{"small jobs: enqueue (created_at) -> start p50 / p99 / max", fmt.Sprintf("%.2f / %.2f / %.2f ms", pctMs(enq, 50), pctMs(enq, 99), pctMs(enq, 100)),
			"adds the insert of the small jobs and the ANALYZE"},
		{"small jobs that never started", format(missing), "0"},
		{"big jobs started before the last small job started", format(m.fw.bigBeforeLast), fmt.Sprintf("a few times %d", o.KeyLimit)},
		{"dispatchers' start -> last small job done", fmt.Sprintf("%.3f s", smallDone.Seconds()), ""},
		{"dispatchers' start -> stop", fmt.Sprintf("%.2f s", m.elapsed.Seconds()), fmt.Sprintf("small jobs done + %v unless --drain", o.Tail)},
		{"big jobs done by then / left waiting", fmt.Sprintf("%d / %d", m.bigDone, m.waiting), ""},
		{"big key rate", fmt.Sprintf("%.0f jobs/s", bigRate), fmt.Sprintf("at most %d / handler time", o.KeyLimit)},
		{"big key backlog drain time", drainEst, ""},
		{"big key: most running at once", format(m.bigSlots.MaxPerKey), fmt.Sprintf("<= %d", o.KeyLimit)},
		{"handler starts above their key's limit", format(m.smallSlots.OverLimit), "0"},
		{"big key slot waits (slot freed at the limit -> next start): count, p50 / p99 / max", fmt.Sprintf("%d, %.2f / %.2f / %.2f ms",
			len(m.bigSlots.Waits), m.bigSlots.waitMs(50), m.bigSlots.waitMs(99), m.bigSlots.waitMs(100)),
			"few: a slot stays held after its handler returns, until the finish"},
		{"lock attempts: acquired / taken / unavailable", fmt.Sprintf("%d / %d / %d", m.stats.Locks.Acquired, m.stats.Locks.Taken, m.stats.Locks.Unavailable), ""},
		{"claimed / processed / released (no exec lock)", fmt.Sprintf("%d / %d / %d", m.stats.Claimed, m.stats.Processed, m.stats.Released), ""},
	}})
	m.acc.record(r)
	s.statements("dispatchers' statements during the run (client-side time)")
}
