package integration_test

// The fault suite's Redis scenarios (1 to 5 in docs/reliability.md): one key contended by 200 workers, a
// minority and a majority of the lock nodes killed, a node stalled, and nodes restarted empty under a
// running job. Shared parts are in faults_redis_helpers_test.go.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
	"github.com/jobpipe/jobpipe/internal/testenv"
)

const (
	// frLeaseTTL is the workers' lease in scenarios 2 to 4: heartbeats every 2 s, and execlock's call
	// timeout at its default of a second (a quarter of the TTL, at most 1 s).
	frLeaseTTL = 6 * time.Second
	// frCallTimeout is execlock's bound on each lock call for frLeaseTTL (Config.CallTimeout).
	frCallTimeout = time.Second
	// frWarmUp lets the workers and the feed settle before the first window is measured.
	frWarmUp = 2 * time.Second
	// frKeepUp is the share of the offered load a healthy system delivers in every window of scenarios
	// 2 to 5. The feed offers a fraction of what two workers sustain on a loaded 2-core machine, so a
	// system that keeps working keeps up with it; the fifth left over covers the windows' edges
	// cutting through the feed's batches (one every 50 ms) and the machine's noise. A fault that made lock calls wait for a dead or stalled node (go-redis's default
	// 5 s reads, or no fail-fast) would cut throughput far below it.
	frKeepUp = 0.8
)

// frSettings are the workers' settings in scenarios 2 to 5: short jobs (1 to 3 ms) and frLeaseTTL.
func frSettings(s *faultkit.WorkerSettings) {
	s.SleepMin, s.SleepMax = time.Millisecond, 3*time.Millisecond
	s.LeaseTTL = frLeaseTTL
	s.PollInterval = 500 * time.Millisecond
	s.Concurrency = 20
}

// Scenario 1: 200 workers in 4 processes (Concurrency 50 each) on one key, with 3 Redis nodes. Every
// finish wakes every dispatcher, and each then looks at the key's next job at once; only one may start
// it. First one process works 150 jobs alone (before), then four work 300 (during), then three of them
// leave by SIGTERM while 150 more run (after). It must show: never two jobs of the key at once (mp_conc
// max_seen == 1, and every ledger row counted 1 running), the jobs starting in exactly their enqueue
// order, each once, on its first attempt; the contenders taking turns; throughput under contention not
// collapsing.
func TestFault01OneKeyContention(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	const (
		blog                   = 1
		before, during, after  = 150, 300, 150
		contenders, perProcess = 4, 50
		// Contention must not collapse the key's throughput: with four times the claimers, each woken by
		// every finish, the key keeps at least this share of the single-process rate. A herd (every idle
		// worker trying the key's lock at each hand-off) would cost an order of magnitude; Locks.Taken
		// below sees it directly. One job at a time, the rate is bound by the hand-off, and four
		// processes do four times the wake-up work per hand-off, which a machine starved by other
		// suites stretches: the bound leaves room for that, and still catches a herd.
		minShare = 0.25
	)
	faultkit.Reserve(t, contenders)
	e := newFREnv(t, 3, false, false)
	set := func(s *faultkit.WorkerSettings) {
		s.SleepMin, s.SleepMax = time.Millisecond, 3*time.Millisecond
		s.Concurrency = perProcess
		// Key runs of 10 jobs, so that the key changes hands often enough to be contended for: a run
		// with the default budget would keep it in one process for most of the scenario.
		s.KeyRunJobs = 10
		s.LeaseTTL = 10 * time.Second // no lease may be lost here
		s.PollInterval = 500 * time.Millisecond
	}
	workers := e.startWorkers(t, set, "w1")
	enqueued := faultkit.Enqueued{}
	// run enqueues n jobs of the key, calls meanwhile (if any), waits until every job is processed, and
	// returns the throughput from the enqueue until then, and that window.
	run := func(firstSeq, n int, meanwhile func()) (float64, time.Time, time.Time) {
		from := e.Now(t)
		e.Enqueue(t, enqueued, []int64{blog}, firstSeq, n)
		if meanwhile != nil {
			meanwhile()
		}
		faultkit.WaitFor(t, "every job processed", 90*time.Second, func() bool {
			if n := e.Count(t, "failed_at IS NOT NULL"); n > 0 {
				t.Fatalf("%d jobs failed", n)
			}
			return e.Count(t, "processed_at IS NOT NULL") == len(enqueued)
		})
		to := e.Now(t)
		return faultkit.LedgerRate(t, e.DB, "", from, to), from, to
	}
	rBefore, _, _ := run(0, before, nil)

	workers = append(workers, e.startWorkers(t, set, "w2", "w3", "w4")...)
	rDuring, duringFrom, duringTo := run(before, during, nil)

	var left time.Time
	var took []time.Duration
	rAfter, _, _ := run(before+during, after, func() {
		faultkit.WaitFor(t, "the last batch under way", 30*time.Second, func() bool {
			return e.Count(t, "processed_at IS NOT NULL") >= before+during+after/5
		})
		left = e.Now(t)
		took = faultkit.Terminate(t, workers[1:]...)
	})
	frCheckAlive(t, "the contention", workers[0])
	total := before + during + after

	e.CheckDoneOnce(t, enqueued, nil, 1)
	fig := e.frCheckJobs(t, frKindJobs{Table: faultkit.KeyedKind, Keyed: true, Jobs: enqueued})
	conc := e.CheckConc(t, nil, 1)
	if conc[blog] != 1 {
		t.Errorf("blog %d: at most %d handlers at once, want exactly 1", blog, conc[blog])
	}
	starts := e.Starts(t, blog)
	byProcess := map[string]int{}
	var handoffs []time.Duration
	var longestAfterLeaving time.Duration
	for i, m := range starts {
		if m.Seq != int64(i) || m.Running != 1 {
			t.Errorf("start %d of blog %d: %v with %d running; want seq %d, alone", i, blog, m, m.Running, i)
		}
		if i > 0 && starts[i-1].EndedAt != nil {
			gap := m.StartedAt.Sub(*starts[i-1].EndedAt)
			if m.Seq >= before && m.Seq < before+during {
				handoffs = append(handoffs, gap)
			}
			if m.StartedAt.After(left) {
				longestAfterLeaving = max(longestAfterLeaving, gap)
			}
		}
		if !m.StartedAt.Before(duringFrom) && m.StartedAt.Before(duringTo) {
			byProcess[m.Node]++
		}
	}
	// Each contender won the key in its turn, or contention did not happen.
	if len(byProcess) < 3 {
		t.Errorf("under contention only %d processes ran jobs (%v): the key went to too few contenders", len(byProcess), byProcess)
	}
	if rDuring < minShare*rBefore {
		t.Errorf("throughput under contention %.1f jobs/s, below %.0f%% of one process's %.1f", rDuring, 100*minShare, rBefore)
	}

	faultkit.Terminate(t, workers[0])
	e.CheckQuiet(t)
	sum := faultkit.SumStats(t, workers)
	faultkit.CheckCleanStats(t, sum, total)
	// No herd in Redis either: a key whose job runs is left alone in the table, so its lock is tried
	// about once per job, by the one dispatcher that locked the key's next row.
	if sum.Locks.Taken > uint64(total)/20 {
		t.Errorf("%d lock attempts found the key's lock taken, for %d jobs: the contenders hammered Redis", sum.Locks.Taken, total)
	}
	e.CheckOrder(t)
	if a := faultkit.CheckAudit(t, e.DB, faultkit.KeyedKind, ""); a.Completions != total || a.Rescues != 0 {
		t.Errorf("audit: %+v; want %d completions and no rescue", a, total)
	}
	sort.Slice(handoffs, func(i, j int) bool { return handoffs[i] < handoffs[j] })
	var p50, p99 time.Duration
	if n := len(handoffs); n > 0 {
		p50, p99 = handoffs[n/2], handoffs[min(n-1, n*99/100)]
	}
	faultkit.ReportFigures(t, "01 one key, 200 workers",
		"before (1 process)", rBefore, "during (4 processes)", rDuring, "after (3 left)", rAfter,
		"recovery (longest hand-off after 3 left)", longestAfterLeaving, "duplicates", fig.Duplicates, "lost", fig.Lost,
		"max running", conc[blog], "hand-off p50", p50, "hand-off p99", p99, "jobs per process under contention", fmt.Sprint(byProcess),
		"lock attempts refused (Locks.Taken)", sum.Locks.Taken, "claims refused", sum.ClaimsRefused, "released", sum.Released,
		"SIGTERM exits", fmt.Sprint(took))
}

// Scenario 2: one of three Redis nodes is SIGKILLed for 8 s, then comes back empty (frNodeFault).
// Progress must continue at the offered rate (frKeepUp) during and after, lock calls and heartbeats
// stay bounded (none fails, none lasts longer than the call timeout), no lease is lost, and every job
// runs exactly once, one per key at a time, in order.
func TestFault02RedisMinorityDown(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	frNodeFault(t, frNodeCase{name: "02 redis minority down (1 of 3 killed, back empty)", nodes: 3, during: 8 * time.Second,
		fault: func(t *testing.T, n *testenv.RedisNode) { n.Kill() },
		heal:  func(t *testing.T, n *testenv.RedisNode) { n.Restart(t) }})
}

// Scenario 3: two of three Redis nodes are SIGKILLed for 10 s while two worker processes work a keyed
// kind (40 jobs/s over 100 keys, and four long jobs that run until their lease is lost) and a plain
// kind (60 jobs/s), then come back empty. While the majority is down: no keyed job starts (after the
// kill plus frOutageBound), the running long jobs stop within their lease (their heartbeats fail, so
// their contexts are cancelled) and are not recorded as done, the plain kind keeps the offered rate
// (frKeepUp), and no process exits. After: everything resumes and every job finishes, once.
func TestFault03RedisMajorityDown(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	const (
		phase, outage = 8 * time.Second, 10 * time.Second
	)
	faultkit.Reserve(t, 2)
	e := newFREnv(t, 3, true, false)
	long := faultkit.Enqueued{}
	longBlogs := []int64{901, 902, 903, 904}
	longIDs := e.Enqueue(t, long, longBlogs, 0, 1)
	workers := e.startWorkers(t, func(s *faultkit.WorkerSettings) {
		frSettings(s)
		// Until the lease is lost; the retry is short. By blog, not id: the plain kind's ids are the same numbers.
		s.BlockBlogs, s.BlockUpToAttempt = longBlogs, 1
	}, "w1", "w2")
	faultkit.WaitFor(t, "the long jobs running", 30*time.Second, func() bool { return len(e.Ledger(t)) == len(longIDs) })
	// 100 jobs/s in all: after the outage the workers also catch up with its keyed backlog (400 jobs).
	load := e.startLoad(t, frLoadSpec{Keys: 100, KeyedRate: 40, PlainRate: 60, LockProbe: true})
	var killed time.Time
	w := e.phases(t, workers, phase, outage, func() {
		e.redis[1].Kill()
		e.redis[2].Kill()
		killed = e.Now(t)
	}, func() {
		e.redis[1].Restart(t)
		e.redis[2].Restart(t)
	})
	keyed, plain := load.stop(t)
	e.logSeries(t, w)

	st, figs := e.finish(t, workers,
		frKindJobs{Table: faultkit.KeyedKind, Keyed: true, Jobs: frMerge(keyed, long)},
		frKindJobs{Table: faultkit.RedisPlainKind, LedgerKind: faultkit.RedisPlainKind, Jobs: plain})
	e.CheckConc(t, nil, 1)
	lastStart, firstAfter := e.checkNoKeyedStart(t, w.Fault, w.Heal)
	// The long jobs: stopped within their lease, not done, retried once after the outage.
	var stoppedWithin time.Duration
	for i, id := range longIDs {
		calls := e.Starts(t, longBlogs[i]) // by blog: the plain kind's ids are the same numbers
		if len(calls) != 2 || calls[0].EndedAt == nil || calls[0].Outcome == nil || calls[1].Outcome == nil ||
			calls[1].Attempt != 2 || *calls[1].Outcome != "ok" || calls[1].StartedAt.Before(w.Heal) {
			t.Errorf("long job %d: calls %v; want one ended by its lost lease during the outage, then one ok after it", id, calls)
			continue
		}
		// The lost attempt was written as a retry, not as done: the row needed a second attempt, and
		// keeps the first one's reason.
		if row := e.Row(t, id); !row.Processed || row.Attempts != 2 || row.LastError == nil ||
			!strings.HasPrefix(*row.LastError, dispatcher.ErrLeaseLost.Error()) {
			t.Errorf("long job %d: row %+v; want processed on attempt 2, the lost lease as its last error", id, row)
		}
		stopped := calls[0].EndedAt.Sub(w.Fault)
		stoppedWithin = max(stoppedWithin, stopped)
		if stopped > frLeaseTTL || calls[0].EndedAt.Before(w.Fault) || !frLeaseLost(calls[0]) {
			t.Errorf("long job %d: first call %v ended %v after the kill; want its lease lost within the lease TTL %v", id, calls[0], stopped, frLeaseTTL)
		}
	}
	if figs[0].LeaseLost != len(longIDs) || st.LeasesLost != int64(len(longIDs)) || st.Retried != int64(len(longIDs)) {
		t.Errorf("lost leases: %d in the ledger, %d in the stats (retried %d); want exactly the %d long jobs'", figs[0].LeaseLost, st.LeasesLost, st.Retried, len(longIDs))
	}
	if st.Rescued != 0 || st.Failed != 0 || st.StaleFinishes != 0 || figs[0].Duplicates != 0 || figs[1].Duplicates != 0 {
		t.Errorf("workers' stats %+v, duplicates %d and %d; want no rescue, failure, stale finish or duplicate", st, figs[0].Duplicates, figs[1].Duplicates)
	}
	rk, rp := w.rates(t, e.DB, ""), w.rates(t, e.DB, faultkit.RedisPlainKind)
	if rp.During == 0 || rp.During < frKeepUp*rp.Before || rp.After < frKeepUp*rp.Before {
		t.Errorf("plain throughput before/during/after %.1f/%.1f/%.1f jobs/s: want at least %.0f%% of before while Redis is down",
			rp.Before, rp.During, rp.After, 100*frKeepUp)
	}
	if rk.After < frKeepUp*rk.Before {
		t.Errorf("keyed throughput after the outage %.1f jobs/s, want at least %.0f%% of before (%.1f)", rk.After, 100*frKeepUp, rk.Before)
	}
	locks := load.locks.between(killed, w.Heal)
	frCheckBounded(t, "lock calls with the majority down", locks, frCallTimeout+250*time.Millisecond, false)
	recovery := frRecovery(t, e.DB, "", w.Heal, w.End, 0.9*rk.Before)
	if recovery < 0 {
		t.Errorf("the keyed kind's throughput never came back to 90%% of before (%.1f jobs/s) after the outage", rk.Before)
	}
	faultkit.ReportFigures(t, "03 redis majority down (2 of 3 killed, back empty)", "outage", outage,
		"keyed before", rk.Before, "keyed during", rk.During, "keyed after", rk.After,
		"plain before", rp.Before, "plain during", rp.During, "plain after", rp.After,
		"recovery (keyed, from the restore)", recovery, "duplicates", figs[0].Duplicates+figs[1].Duplicates, "lost", figs[0].Lost+figs[1].Lost,
		"last keyed start into the outage", frSince(lastStart, w.Fault), "first keyed start after the restore", frSince(firstAfter, w.Heal),
		"running jobs stopped within", stoppedWithin, "leases lost", st.LeasesLost, "claims released", st.Released,
		"lock calls during", locks)
}

// Scenario 4: a Redis node is stopped (SIGSTOP) for longer than every client timeout (500 ms per node
// command, 1 s per lock call), then continued (frNodeFault), in the two cases that differ. One of three
// nodes, for 8 s: the quorum answers without it, so it must go as in scenario 2. The only node, for
// 5 s: no lock call can succeed, so no keyed job may start, and the probe jobs' heartbeats fail, which
// must stop them (lease lost) rather than hang. In both, no lock call or heartbeat may last longer than
// its bound, and after SIGCONT no lock may stay stuck: lock calls succeed again within two call
// timeouts (the janitor deletes what the stalled node applied late), every job finishes, once, and no
// lock key is left at the end.
func TestFault04RedisNodeStalled(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	stall := func(t *testing.T, n *testenv.RedisNode) { n.Pause() }
	resume := func(t *testing.T, n *testenv.RedisNode) { n.Resume() }
	t.Run("one of three", func(t *testing.T) {
		frNodeFault(t, frNodeCase{name: "04 redis node stalled (1 of 3)", nodes: 3, during: 8 * time.Second, fault: stall, heal: resume})
	})
	t.Run("the only node", func(t *testing.T) {
		frNodeFault(t, frNodeCase{name: "04 redis node stalled (the only node)", nodes: 1, during: 5 * time.Second, fault: stall, heal: resume})
	})
}

// frNodeCase is a fault of scenarios 2 and 4, applied to the first of a scenario's Redis nodes.
type frNodeCase struct {
	name        string        // the figures' scenario name
	nodes       int           // Redis nodes; with more than one the others keep a quorum
	during      time.Duration // how long the fault lasts
	fault, heal func(t *testing.T, n *testenv.RedisNode)
}

// frNodeFault runs a fault of one Redis node under two worker processes working 100 keys at a steady
// 100 jobs/s, with four probe jobs heartbeating every 200 ms and the lock probe timing lock calls
// from the test process, 8 s before the fault and 8 s after it. When the other nodes keep a quorum,
// nothing may change: the offered rate is kept (frKeepUp), no lock call or heartbeat fails, no lease
// is lost, every job runs once. When the faulted node is the only one, nothing keyed may start during
// the fault (checkNoKeyedStart), each probe job loses its lease once, and the offered rate is kept
// again after it. Always: lock calls and heartbeats bounded by the call timeout (plus slack for a
// heartbeat's database write), lock calls succeeding again within two call timeouts of the heal,
// nothing lost, no duplicate, every check of finish.
func frNodeFault(t *testing.T, c frNodeCase) {
	const (
		keyedRate = 100.0
		phase     = 8 * time.Second
		probes    = 4
		lockBound = frCallTimeout + 250*time.Millisecond
		beatBound = frCallTimeout + 500*time.Millisecond
	)
	faultkit.Reserve(t, 2)
	e := newFREnv(t, c.nodes, false, true)
	workers := e.startWorkers(t, frSettings, "w1", "w2")
	load := e.startLoad(t, frLoadSpec{Keys: 100, KeyedRate: keyedRate, Probes: probes, LockProbe: true})
	w := e.phases(t, workers, phase, c.during, func() { c.fault(t, e.redis[0]) }, func() { c.heal(t, e.redis[0]) })
	keyed, _ := load.stop(t)
	e.logSeries(t, w)

	st, figs := e.finish(t, workers,
		frKindJobs{Table: faultkit.KeyedKind, Keyed: true, Jobs: keyed},
		frKindJobs{Table: faultkit.ProbeKind, LedgerKind: faultkit.ProbeKind, Keyed: true, Jobs: load.probes})
	e.CheckConc(t, nil, 1)
	quorum := c.nodes > 1
	r := w.rates(t, e.DB, "")
	// Calls that started up to a call timeout before the fault end in it: they count as during. After
	// the heal, calls may fail until the janitor has swept once (every call timeout).
	windows := [3][2]time.Time{{w.Start, w.Fault.Add(-frCallTimeout)}, {w.Fault.Add(-frCallTimeout), w.Heal}, {w.Heal.Add(2 * frCallTimeout), w.End}}
	var locks, beats, lags [3]frLatency
	for i, phase := range []string{"before", "during", "after"} {
		locks[i] = load.locks.between(windows[i][0], windows[i][1])
		beats[i] = e.heartbeats(t, windows[i][0], windows[i][1])
		lags[i] = e.startLag(t, windows[i][0], windows[i][1])
		frCheckBounded(t, "lock calls "+phase, locks[i], lockBound, quorum || i != 1)
		frCheckBounded(t, "heartbeats "+phase, beats[i], beatBound, quorum || i != 1)
	}
	if figs[0].Duplicates != 0 || figs[1].Duplicates != 0 || st.Rescued != 0 || st.Failed != 0 || st.StaleFinishes != 0 {
		t.Errorf("duplicates %d and %d, stats %+v; want no duplicate, rescue, failure or stale finish", figs[0].Duplicates, figs[1].Duplicates, st)
	}
	var lastStart, firstAfter time.Time
	if quorum {
		if st.LeasesLost != 0 || st.Retried != 0 || figs[0].Calls != figs[0].Jobs {
			t.Errorf("stats %+v, keyed jobs %+v; want no lease lost or retry, every job run once", st, figs[0])
		}
		if r.During < frKeepUp*r.Before {
			t.Errorf("keyed throughput during the fault %.1f jobs/s, want at least %.0f%% of before (%.1f): the other nodes keep a quorum",
				r.During, 100*frKeepUp, r.Before)
		}
	} else {
		lastStart, firstAfter = e.checkNoKeyedStart(t, w.Fault, w.Heal)
		// Each probe job heartbeats every 200 ms: each loses its lease in the fault, once.
		if st.LeasesLost != probes || figs[1].LeaseLost != probes {
			t.Errorf("leases lost: %d in the stats, %d probe calls; want each of the %d probe jobs' once", st.LeasesLost, figs[1].LeaseLost, probes)
		}
	}
	if r.After < frKeepUp*r.Before {
		t.Errorf("keyed throughput after the fault %.1f jobs/s, want at least %.0f%% of before (%.1f)", r.After, 100*frKeepUp, r.Before)
	}
	recovery := frRecovery(t, e.DB, "", w.Heal, w.End, 0.9*r.Before)
	if recovery < 0 {
		t.Errorf("the keyed kind's throughput never came back to 90%% of before (%.1f jobs/s) after the fault", r.Before)
	}
	figures := []any{"fault", c.during, "offered", keyedRate,
		"before", r.Before, "during", r.During, "after", r.After, "recovery (from the heal)", recovery,
		"duplicates", figs[0].Duplicates + figs[1].Duplicates, "lost", figs[0].Lost + figs[1].Lost,
		"lock calls during", locks[1], "lock p99 before/during/after", frP99s(locks[:]),
		"heartbeats during", beats[1], "start lag p99 before/during/after", frP99s(lags[:])}
	if !quorum {
		figures = append(figures, "last keyed start into the fault", frSince(lastStart, w.Fault),
			"first keyed start after the heal", frSince(firstAfter, w.Heal))
	}
	figures = append(figures, "leases lost", st.LeasesLost, "claims released", st.Released, "lock attempts unavailable", st.Locks.Unavailable)
	faultkit.ReportFigures(t, c.name, figures...)
}

// frP99s shows the p99s of ls, "/"-separated.
func frP99s(ls []frLatency) string {
	return frEach(ls, func(l frLatency) time.Duration { return l.P99 })
}

// frP50s shows the p50s of ls, "/"-separated.
func frP50s(ls []frLatency) string {
	return frEach(ls, func(l frLatency) time.Duration { return l.P50 })
}

// frEach shows of(l) for each l of ls, "/"-separated (frJoin).
func frEach(ls []frLatency, of func(frLatency) time.Duration) string {
	ds := make([]time.Duration, len(ls))
	for i, l := range ls {
		ds[i] = of(l)
	}
	return frJoin(ds...)
}

// frJoin shows durations to the tenth of a millisecond, "/"-separated.
func frJoin(ds ...time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Microsecond).String()
	}
	return strings.Join(out, "/")
}

// frCheckBounded fails t when calls took longer than bound, or failed while noFailures.
func frCheckBounded(t *testing.T, what string, l frLatency, bound time.Duration, noFailures bool) {
	t.Helper()
	if l.N == 0 {
		t.Errorf("%s: none measured", what)
	}
	if l.Max > bound {
		t.Errorf("%s: %v; want none longer than %v", what, l, bound)
	}
	if noFailures && l.Failed > 0 {
		t.Errorf("%s: %v; want no failure", what, l)
	}
}

// frSince is at - from, or "none" when at is zero.
func frSince(at, from time.Time) any {
	if at.IsZero() {
		return "none"
	}
	return at.Sub(from)
}

// Scenario 5: a job holds its key's execution lock in worker wa when two of the three Redis nodes
// restart empty: Redis forgets the lock, and a second holder takes it (CheckFenceAfterRedisLoss). wa
// is stopped (SIGSTOP) just before, like a process in a long pause, so that it cannot notice; wb works
// a steady feed on other keys meanwhile. The database must refuse every claim of the key while wa's
// lease lasts (its row holds the slot), then the rescue takes the job back and wb runs it again; when
// wa resumes, its write for the job (a stale token) must change nothing: the row stays wb's, running.
// Removing the token fence from the finish makes that write land on wb's running row, which this test
// reports through the row, the audit (CheckAudit) and the ledger (frCheckJobs).
func TestFault05RedisRestartedEmpty(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	const (
		blog     = 500
		leaseTTL = 4 * time.Second
		phase    = 6 * time.Second
	)
	ctx := context.Background()
	faultkit.Reserve(t, 2)
	e := newFREnv(t, 3, false, false)
	held := faultkit.Enqueued{}
	ids := e.Enqueue(t, held, []int64{blog}, 0, 2)
	job, next := ids[0], ids[1]
	set := func(s *faultkit.WorkerSettings) {
		frSettings(s)
		s.LeaseTTL = leaseTTL
		s.RescueInterval, s.LeaderTTL = 200*time.Millisecond, 2*time.Second // wa may lead the rescue: it lapses soon
		s.PollInterval = 200 * time.Millisecond
		s.BlockIDs = []int64{job} // every attempt, until released
	}
	// wa runs the held job and nothing else (Concurrency 1), so that its stop freezes that job alone.
	wa := e.startWorkers(t, func(s *faultkit.WorkerSettings) { set(s); s.Concurrency = 1 }, "wa")[0]
	faultkit.WaitFor(t, "the held job to start in wa", 30*time.Second, func() bool { return len(e.CallsOf(t, job)) == 1 })
	first := e.CallsOf(t, job)[0]
	wb := e.startWorkers(t, set, "wb")[0]
	workers := []*faultkit.Worker{wa, wb}
	load := e.startLoad(t, frLoadSpec{Keys: 50, KeyedRate: 60})

	var leaseEnd time.Time
	var second faultkit.Call
	w := e.phases(t, workers, phase, 0, func() {
		frSignal(t, wa, syscall.SIGSTOP)
		e.redis[0].Restart(t)
		e.redis[1].Restart(t)
		e.CheckFenceAfterRedisLoss(t, blog, first.Slot)
		row := e.Row(t, job)
		if row.LeaseOwner == nil || *row.LeaseOwner != "wa" || row.Token != first.Token || row.LeaseExpiresAt == nil {
			t.Fatalf("the held job after the restart: %+v; want still leased by wa with token %d", row, first.Token)
		}
		leaseEnd = *row.LeaseExpiresAt
		// wb runs the job again only once wa's lease has run out, and nothing else of the key meanwhile.
		faultkit.WaitFor(t, "the held job's second attempt to start", 30*time.Second, func() bool {
			calls := e.CallsOf(t, job)
			if len(calls) > 1 {
				second = calls[1]
			}
			return len(calls) > 1
		})
		if second.Node != "wb" || second.Attempt != 2 || second.Token <= first.Token || !second.StartedAt.After(leaseEnd) {
			t.Errorf("second attempt %v; want attempt 2 in wb, with a greater token, after wa's lease ended at %v", second, leaseEnd)
		}
		if s := e.Starts(t, blog); len(s) != 2 {
			t.Errorf("blog %d: %d handler calls, want the held job's two: %v", blog, len(s), s)
		}
	}, func() {
		frSignal(t, wa, syscall.SIGCONT)
		faultkit.WaitFor(t, "wa's stale attempt to end", 15*time.Second, func() bool { return e.CallsOf(t, job)[0].EndedAt != nil })
		time.Sleep(time.Second) // its outcome goes to wa's finisher, which writes it (or fails to) at once
		if stale := e.CallsOf(t, job)[0]; !frLeaseLost(stale) {
			t.Errorf("wa's attempt %v; want it ended by its lost lease", stale)
		}
		row := e.Row(t, job)
		if row.LeaseOwner == nil || *row.LeaseOwner != "wb" || row.Token != second.Token || row.LeaseExpiresAt == nil || row.Processed {
			t.Errorf("the held job after wa resumed: %+v; want still running in wb with token %d: wa's stale write changed it", row, second.Token)
		}
		var changed int
		if err := e.DB.QueryRow(ctx, `SELECT count(*) FROM fault_audit WHERE kind = $1 AND job_id = $2 AND at > $3
			AND (new_state <> old_state OR new_token <> old_token OR new_owner IS DISTINCT FROM old_owner)`,
			faultkit.KeyedKind, job, second.StartedAt).Scan(&changed); err != nil {
			t.Fatal(err)
		}
		if changed != 0 {
			t.Errorf("the held job's row changed %d times while wb ran it", changed)
		}
		e.Release(t, job)
	})
	keyed, _ := load.stop(t)
	e.logSeries(t, w)

	st, figs := e.finish(t, workers, frKindJobs{Table: faultkit.KeyedKind, Keyed: true, Jobs: frMerge(keyed, held)})
	// wa's frozen attempt counted as running in mp_conc, in its slot, until it resumed and recorded its
	// end, beside wb's in the same slot: a stale holder whose lease the rescue had taken back (frCheckJobs
	// exempts it from the key's one-at-a-time check, and counts it). Every other blog: CheckConc.
	if c := e.Conc(t)[blog]; c.Running != 0 || c.MaxSeen != 2 || c.SlotClashes != 1 || figs[0].StaleOverlaps != 1 {
		t.Errorf("blog %d: %+v, %d stale overlaps; want exactly wa's frozen attempt beside wb's", blog, c, figs[0].StaleOverlaps)
	}
	if _, err := e.DB.Exec(ctx, `DELETE FROM mp_conc WHERE blog_id = $1`, blog); err != nil {
		t.Fatal(err)
	}
	e.CheckConc(t, nil, 1)
	calls := e.CallsOf(t, job)
	if row := e.Row(t, job); len(calls) != 2 || calls[1].Outcome == nil || *calls[1].Outcome != "ok" || !row.Processed ||
		row.Attempts != 2 || row.Token != second.Token {
		t.Errorf("the held job: calls %v, row %+v; want wa's lost attempt, then wb's ok, processed with token %d", calls, row, second.Token)
	}
	nextCalls := e.CallsOf(t, next)
	if len(nextCalls) != 1 || !nextCalls[0].StartedAt.After(*calls[len(calls)-1].EndedAt) {
		t.Errorf("the key's next job: calls %v; want one, after the held job ended", nextCalls)
	}
	sa, sb := wa.Stats(), wb.Stats()
	if sa == nil || sb == nil {
		t.Fatalf("a worker reported no stats: wa %v, wb %v", sa, sb)
	}
	if sa.StaleFinishes != 1 || sa.LeasesLost != 1 || sb.StaleFinishes != 0 || sb.LeasesLost != 0 ||
		st.Rescued != 1 || st.Failed != 0 || figs[0].Duplicates != 0 {
		t.Errorf("stats wa %+v, wb %+v, duplicates %d; want wa's one lost lease and one stale finish refused, one rescue, nothing else", sa, sb, figs[0].Duplicates)
	}
	r := w.rates(t, e.DB, "")
	if r.During < frKeepUp*r.Before || r.After < frKeepUp*r.Before {
		t.Errorf("throughput of the other keys before/during/after %.1f/%.1f/%.1f jobs/s: want at least %.0f%% of before",
			r.Before, r.During, r.After, 100*frKeepUp)
	}
	faultkit.ReportFigures(t, "05 redis restarted empty under a running job",
		"before", r.Before, "during", r.During, "after", r.After,
		"recovery (the key's job running again)", second.StartedAt.Sub(w.Fault), "duplicates", figs[0].Duplicates, "lost", figs[0].Lost,
		"wa's lease ran out after", leaseEnd.Sub(w.Fault), "stale finishes refused", sa.StaleFinishes, "rescued", st.Rescued,
		"claims refused", st.ClaimsRefused, "stale overlaps", figs[0].StaleOverlaps)
}
