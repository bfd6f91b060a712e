package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// slotsUniqueShare is the target for slots: at least this share of unique's rate.
const slotsUniqueShare = 0.9

// runSlots works Jobs jobs over Keys keys of a keyed kind with KeyLimit slots per key, a SlowFraction
// of them sleeping Slow (in runs of SlowRun jobs of one key) and the rest returning at once. The
// handlers watch each key's concurrency:
// it must never exceed the limit, and a slot freed while its key has jobs waiting should be taken
// again promptly (the slot wait).
func runSlots(ctx context.Context, s *session) error {
	o := s.opts
	jobs, keys := int64(o.Jobs), int64(min(o.Keys, o.Jobs))
	kind, err := createKind[slotJob](ctx, s, "bench_slots", jobinfo.KeyLimit(o.KeyLimit))
	if err != nil {
		return err
	}
	var slow int64
	slowOfKey := make([]int64, keys)
	insertTime, err := load(ctx, s, kind, jobs, func(n int64) slotJob {
		j := slotJob{K: n % keys, N: n}
		if slowJob(n, keys, o.SlowRun, o.SlowFraction) {
			j.SleepUS = o.Slow.Microseconds()
			slow++
			slowOfKey[j.K]++
		}
		return j
	})
	if err != nil {
		return err
	}
	if err := s.prepareKeyed(ctx, kind.Info()); err != nil {
		return err
	}
	queued := make([]int64, keys)
	for k := range queued {
		queued[k] = jobs / keys
		if int64(k) < jobs%keys {
			queued[k]++
		}
	}
	w := newSlotWatch(o.KeyLimit, queued)
	times := newJobTimes(jobs)
	var led ledger
	s.trace.reset()
	start := time.Now()
	f, err := s.startFleet(ctx, o.Dispatchers[0], "slots", true, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[slotJob]) error {
			times.began(j.Data.N, w.enter(int(j.Data.K)))
			defer func() { times.ended(j.Data.N, w.leave(int(j.Data.K))) }()
			led.run(j.Data.N)
			return sleepCtx(ctx, time.Duration(j.Data.SleepUS)*time.Microsecond)
		})
	})
	if err != nil {
		return err
	}
	defer f.stop(ctx)
	elapsed, acc, cost, err := s.drainFleet(ctx, f, "slots", start, jobs, kind.Info().Table, &led)
	if err != nil {
		return err
	}
	leftover, err := s.redis.leftover(ctx)
	if err != nil {
		return err
	}
	path, err := s.jobPath(ctx, kind.Info().Table, times)
	if err != nil {
		return err
	}
	s.recordSlots(slotsRun{jobs: jobs, keys: keys, slow: slow, slowBound: slowBound(slowOfKey, o.Slow, o.KeyLimit), elapsed: elapsed, insert: insertTime,
		watch: w.summary(0, int(keys)), stats: f.stats(), leftover: leftover, acc: acc, cost: cost, path: path, bySlow: keysDoneBySlow(times, slowOfKey, start)})
	return nil
}

// slotsRun is what runSlots measured, for its report.
type slotsRun struct {
	jobs, keys, slow int64
	// slowBound is the least time the run can take: its slowest key's sleeps on its slots (see slowBound).
	slowBound       time.Duration
	elapsed, insert time.Duration
	watch           slotSummary
	stats           dispatcher.Stats
	leftover        int64
	acc             accounting
	cost            workCost
	path            jobPath
	bySlow          []keysDone
}

func (s *session) recordSlots(m slotsRun) {
	o, r, h := s.opts, s.report, s.redis.hook
	if m.watch.OverLimit > 0 {
		r.fail("%d handler starts found their key running more than its limit of %d (most at once: %d)",
			m.watch.OverLimit, o.KeyLimit, m.watch.MaxPerKey)
	}
	lockFailed := int64(m.stats.Locks.Taken + m.stats.Locks.Unavailable)
	perSec := rate(m.jobs, m.elapsed)
	r.result("scenario", "slots")
	r.result("jobs", m.jobs)
	r.result("keys", m.keys)
	r.result("key_limit", o.KeyLimit)
	r.result("slow_jobs", m.slow)
	r.result("slow_bound_s", round(m.slowBound.Seconds(), 2))
	r.result("redis_nodes", len(s.redis.nodes))
	r.result("dispatchers", o.Dispatchers[0])
	r.result("workers", o.Workers)
	r.result("seconds", round(m.elapsed.Seconds(), 2))
	r.result("jobs_per_s", perSec)
	r.result("max_per_key", m.watch.MaxPerKey)
	r.result("over_limit", m.watch.OverLimit)
	r.result("reached_limit_keys", m.watch.ReachedLimit)
	r.result("lock_failed", lockFailed)
	r.result("lock_failed_per_1k_jobs", round(float64(lockFailed)*1000/float64(max(m.jobs, 1)), 2))
	r.result("slot_waits", len(m.watch.Waits))
	r.result("slot_wait_p50_ms", m.watch.waitMs(50))
	r.result("slot_wait_p99_ms", m.watch.waitMs(99))
	m.cost.resultPairs(r)
	m.acc.resultPairs(r)
	r.Details["dispatcher_stats"] = m.stats
	r.Details["redis"] = map[string]any{"set_nx": h.setNX.Load(), "set_nx_taken": h.setNXTaken.Load(),
		"scripts": h.scripts.Load(), "errors": h.errs.Load(), "leftover_keys": m.leftover}
	r.Details["slots"] = m.watch
	r.Details["job_path"] = m.path
	r.Details["keys_done_by_slow_jobs"] = m.bySlow
	l := m.stats.Locks
	r.table(Table{Title: "slots", Header: []string{"measure", "value", "target"}, Rows: [][]string{
		{"jobs / keys / limit per key", fmt.Sprintf("%d / %d / %d", m.jobs, m.keys, o.KeyLimit), ""},
		{"slow jobs (handler sleeps)", fmt.Sprintf("%d (%v each; the others return at once)", m.slow, o.Slow), ""},
		{"insert (EnqueueMany, COPY)", fmt.Sprintf("%.1f s, %.0f jobs/s", m.insert.Seconds(), rate(m.jobs, m.insert)), ""},
		{"work time", fmt.Sprintf("%.2f s", m.elapsed.Seconds()), ""},
		{"least work time: the key with the most slow jobs, sleeping on all its slots", fmt.Sprintf("%.2f s (%.0f jobs/s at most)", m.slowBound.Seconds(), rate(m.jobs, m.slowBound)), ""},
		{"rate", fmt.Sprintf("%.0f jobs/s", perSec), fmt.Sprintf(">= %.0f%% of unique's rate (run `jobpipe bench unique` alongside)", slotsUniqueShare*100)},
		{"most jobs of one key running at once", format(m.watch.MaxPerKey), fmt.Sprintf("<= %d", o.KeyLimit)},
		{"handler starts above the key's limit", format(m.watch.OverLimit), "0"},
		{"keys that reached their limit", fmt.Sprintf("%d of %d", m.watch.ReachedLimit, m.keys), ""},
		{"slot waits (slot freed at the limit -> key's next start): count", format(len(m.watch.Waits)), ""},
		{"slot wait p50 / p99 / max", fmt.Sprintf("%.2f / %.2f / %.2f ms", m.watch.waitMs(50), m.watch.waitMs(99), m.watch.waitMs(100)), ""},
		{"lock attempts: acquired / taken / unavailable", fmt.Sprintf("%d / %d / %d", l.Acquired, l.Taken, l.Unavailable), ""},
		{"failed lock attempts per 1,000 jobs", format(round(float64(l.Taken+l.Unavailable)*1000/float64(max(m.jobs, 1)), 2)), ""},
		{"claim (started_at) -> handler start p50 / p99 / max", m.path.ClaimToStart.String(), ""},
		{"handler end -> finish (processed_at) p50 / p99 / max", m.path.EndToFinish.String(), ""},
		{"claimed / processed / released (no exec lock)", fmt.Sprintf("%d / %d / %d", m.stats.Claimed, m.stats.Processed, m.stats.Released), ""},
		{"claims refused by the database / leases lost", fmt.Sprintf("%d / %d", m.stats.ClaimsRefused, m.stats.LeasesLost), "0 / 0"},
		{"claim passes that went on without pausing the finishes", format(m.stats.PausesMissed), "0"},
		{"key runs ended, by why", keyRunsEnded(m.stats), ""},
		{"keys by their slow jobs: keys, last job ended mean / max (s)", keysDoneString(m.bySlow), ""},
		{"SET NX sent to nodes / refused (taken)", fmt.Sprintf("%d / %d", h.setNX.Load(), h.setNXTaken.Load()), ""},
		{"Redis command errors", format(h.errs.Load()), "0"},
		{"lock keys left in Redis after Stop", format(m.leftover), "0"},
	}})
	r.table(m.cost.table())
	m.acc.record(r)
	s.statements("dispatchers' statements during the run (client-side time)")
}

// keysDone is when the keys with the same number of slow jobs ended their last job, in seconds
// after the work began. Every key has as many fast jobs, so a key's time is its fast jobs' turns
// plus its sleeps: the spread between the groups shows what the sleeps cost.
type keysDone struct {
	Slow int64   `json:"slow_jobs"`
	Keys int     `json:"keys"`
	Mean float64 `json:"mean_s"`
	Max  float64 `json:"max_s"`
}

// keysDoneBySlow groups the keys by their slow jobs (job n is key n % len(slowOfKey)), fewest first,
// leaving out keys none of whose jobs ended.
func keysDoneBySlow(t *jobTimes, slowOfKey []int64, start time.Time) []keysDone {
	keys := int64(len(slowOfKey))
	last := make([]int64, keys)
	for n := range t.end {
		last[int64(n)%keys] = max(last[int64(n)%keys], t.end[n].Load())
	}
	groups := map[int64]*keysDone{}
	for k, at := range last {
		if at == 0 {
			continue // no job of the key ended: the run failed, and says why elsewhere
		}
		g := groups[slowOfKey[k]]
		if g == nil {
			g = &keysDone{Slow: slowOfKey[k]}
			groups[slowOfKey[k]] = g
		}
		secs := time.Duration(at - start.UnixNano()).Seconds()
		g.Keys++
		g.Mean += secs
		g.Max = max(g.Max, secs)
	}
	var out []keysDone
	for _, g := range groups {
		g.Mean, g.Max = round(g.Mean/float64(g.Keys), 2), round(g.Max, 2)
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b keysDone) int { return cmp.Compare(a.Slow, b.Slow) })
	return out
}

func keysDoneString(groups []keysDone) string {
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = fmt.Sprintf("%d slow: %d, %.2f / %.2f", g.Slow, g.Keys, g.Mean, g.Max)
	}
	return strings.Join(parts, "; ")
}

// slowBound is the least time a run of the benchmark takes, however it is scheduled: a key's slow
// jobs sleep slow each on at most limit slots at once, so the key with the most of them needs at
// least their sleeps shared by its slots. A fast machine drains the other jobs sooner, and the bound
// is then most of the run.
func slowBound(slowOfKey []int64, slow time.Duration, limit int) time.Duration {
	most := int64(0)
	for _, n := range slowOfKey {
		most = max(most, n)
	}
	return time.Duration(most) * slow / time.Duration(max(limit, 1))
}

// slowJob says whether job n (of keys keys, round-robin) is one of the slow ones. A key's jobs are
// grouped in runs of run consecutive jobs, and a run is slow when a fixed hash of its key and number
// falls below fraction: the same jobs are slow in every run of the benchmark, spread over the keys,
// and a slow run of more than KeyLimit jobs brings its key to its limit and then has jobs waiting for
// a slot. Spread evenly (run 1), a small fraction of slow jobs keeps well under one slow job per key
// running, and no key would ever reach its limit.
func slowJob(n, keys int64, run int, fraction float64) bool {
	key, group := n%keys, n/keys/int64(run)
	x := (uint64(key)<<40 ^ uint64(group)) + 0x9e3779b97f4a7c15 // splitmix64
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11)/(1<<53) < fraction
}

// sleepCtx sleeps d, or until ctx ends: a handler must return once its context is cancelled.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
