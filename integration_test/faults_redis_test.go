package integration_test

// The fault suite's Redis scenarios (1 to 5 in docs/reliability.md): one key contended by 200 workers, a
// minority and a majority of the lock nodes killed, a node stalled, and nodes restarted empty under a
// running job. Their world, load and checks are faultkit.RedisWorld's.

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

	// Arranged: one worker process works the key's first jobs alone.
	faultkit.Reserve(t, contenders)
	sc := arrangeOneKey(t, blog, perProcess)
	rBefore, _, _ := sc.run(t, 0, before, nil)

	// Injected: three more processes contend for the key, then leave (SIGTERM) while its last jobs run.
	sc.workers = append(sc.workers, sc.e.StartWorkers(t, sc.set, "w2", "w3", "w4")...)
	rDuring, duringFrom, duringTo := sc.run(t, before, during, nil)
	var left time.Time
	var took []time.Duration
	rAfter, _, _ := sc.run(t, before+during, after, func() { left, took = sc.leave(t, before+during+after/5) })
	faultkit.CheckAliveDuring(t, "the contention", sc.workers[0])
	total := before + during + after

	// What must hold: every job once, one at a time, in enqueue order, the contenders taking turns;
	// throughput kept under contention; no herd on Redis.
	e := sc.e
	e.CheckDoneOnce(t, sc.enqueued, nil, 1)
	fig := e.CheckJobs(t, faultkit.KindJobs{Table: faultkit.KeyedKind, Keyed: true, Jobs: sc.enqueued})
	conc := e.CheckConc(t, nil, 1)
	if conc[blog] != 1 {
		t.Errorf("blog %d: at most %d handlers at once, want exactly 1", blog, conc[blog])
	}
	turns := sc.checkStartsInOrderInTurns(t, left, duringFrom, duringTo, before, during)
	if rDuring < minShare*rBefore {
		t.Errorf("throughput under contention %.1f jobs/s, below %.0f%% of one process's %.1f", rDuring, 100*minShare, rBefore)
	}
	sum := sc.stopAndCheckNoHerd(t, total)
	p50, p99 := handOffPercentiles(turns.handoffs)
	faultkit.ReportFigures(t, "01 one key, 200 workers",
		"before (1 process)", rBefore, "during (4 processes)", rDuring, "after (3 left)", rAfter,
		"recovery (longest hand-off after 3 left)", turns.longestAfterLeaving, "duplicates", fig.Duplicates, "lost", fig.Lost,
		"max running", conc[blog], "hand-off p50", p50, "hand-off p99", p99, "jobs per process under contention", fmt.Sprint(turns.byProcess),
		"lock attempts refused (Locks.Taken)", sum.Locks.Taken, "claims refused", sum.ClaimsRefused, "released", sum.Released,
		"SIGTERM exits", fmt.Sprint(took))
}

// oneKey is scenario 1's world: worker processes of 50 slots each, contending for one key.
type oneKey struct {
	e        *faultkit.RedisWorld
	blog     int64
	set      func(s *faultkit.WorkerSettings)
	workers  []*faultkit.Worker
	enqueued faultkit.Enqueued
}

// arrangeOneKey starts the first worker process, of perProcess slots.
func arrangeOneKey(t *testing.T, blog int64, perProcess int) *oneKey {
	t.Helper()
	sc := &oneKey{e: faultkit.NewRedisWorld(t, faultkit.RedisWorldSpec{Nodes: 3}), blog: blog, enqueued: faultkit.Enqueued{}}
	sc.set = func(s *faultkit.WorkerSettings) {
		s.SleepMin, s.SleepMax = time.Millisecond, 3*time.Millisecond
		s.Concurrency = perProcess
		// Key runs of 10 jobs, so that the key changes hands often enough to be contended for: a run
		// with the default budget would keep it in one process for most of the scenario.
		s.KeyRunJobs = 10
		s.LeaseTTL = 10 * time.Second // no lease may be lost here
		s.PollInterval = 500 * time.Millisecond
	}
	sc.workers = sc.e.StartWorkers(t, sc.set, "w1")
	return sc
}

// run enqueues n jobs of the key, calls meanwhile (if any), waits until every job is processed, and
// returns the throughput from the enqueue until then, and that window.
func (sc *oneKey) run(t *testing.T, firstSeq, n int, meanwhile func()) (float64, time.Time, time.Time) {
	t.Helper()
	e := sc.e
	from := e.Now(t)
	e.Enqueue(t, sc.enqueued, []int64{sc.blog}, firstSeq, n)
	if meanwhile != nil {
		meanwhile()
	}
	faultkit.WaitFor(t, "every job processed", 90*time.Second, func() bool {
		if n := e.Count(t, "failed_at IS NOT NULL"); n > 0 {
			t.Fatalf("%d jobs failed", n)
		}
		return e.Count(t, "processed_at IS NOT NULL") == len(sc.enqueued)
	})
	to := e.Now(t)
	return faultkit.LedgerRate(t, e.DB, "", from, to), from, to
}

// leave waits until processed jobs reach underWay, then stops every worker but the first (SIGTERM).
// It returns when they left and how long each took to exit.
func (sc *oneKey) leave(t *testing.T, underWay int) (time.Time, []time.Duration) {
	t.Helper()
	faultkit.WaitFor(t, "the last batch under way", 30*time.Second, func() bool {
		return sc.e.Count(t, "processed_at IS NOT NULL") >= underWay
	})
	left := sc.e.Now(t)
	return left, faultkit.Terminate(t, sc.workers[1:]...)
}

// turns is how the key's jobs changed hands.
type turns struct {
	byProcess           map[string]int  // jobs per process under contention
	handoffs            []time.Duration // from a job's end to the next one's start, under contention
	longestAfterLeaving time.Duration   // the longest hand-off once three processes had left
}

// checkStartsInOrderInTurns checks that the key's jobs started in seq order, each alone, and that the
// contenders took turns; it returns the hand-offs.
func (sc *oneKey) checkStartsInOrderInTurns(t *testing.T, left, duringFrom, duringTo time.Time, before, during int) turns {
	t.Helper()
	blog := sc.blog
	starts := sc.e.Starts(t, blog)
	tr := turns{byProcess: map[string]int{}}
	for i, m := range starts {
		if m.Seq != int64(i) || m.Running != 1 {
			t.Errorf("start %d of blog %d: %v with %d running; want seq %d, alone", i, blog, m, m.Running, i)
		}
		if i > 0 && starts[i-1].EndedAt != nil {
			gap := m.StartedAt.Sub(*starts[i-1].EndedAt)
			if m.Seq >= int64(before) && m.Seq < int64(before+during) {
				tr.handoffs = append(tr.handoffs, gap)
			}
			if m.StartedAt.After(left) {
				tr.longestAfterLeaving = max(tr.longestAfterLeaving, gap)
			}
		}
		if !m.StartedAt.Before(duringFrom) && m.StartedAt.Before(duringTo) {
			tr.byProcess[m.Node]++
		}
	}
	// Each contender won the key in its turn, or contention did not happen.
	if len(tr.byProcess) < 3 {
		t.Errorf("under contention only %d processes ran jobs (%v): the key went to too few contenders", len(tr.byProcess), tr.byProcess)
	}
	return tr
}

// stopAndCheckNoHerd stops the first worker (SIGTERM), checks a clean end (nothing left, clean stats,
// claims in order, the audit), and that the contenders did not hammer Redis. It returns the workers'
// summed stats.
func (sc *oneKey) stopAndCheckNoHerd(t *testing.T, total int) dispatcher.Stats {
	t.Helper()
	e := sc.e
	faultkit.Terminate(t, sc.workers[0])
	e.CheckQuiet(t)
	sum := faultkit.SumStats(t, sc.workers)
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
	return sum
}

// handOffPercentiles is the median and 99th percentile of the hand-offs (sorted in place).
func handOffPercentiles(handoffs []time.Duration) (p50, p99 time.Duration) {
	sort.Slice(handoffs, func(i, j int) bool { return handoffs[i] < handoffs[j] })
	if n := len(handoffs); n > 0 {
		p50, p99 = handoffs[n/2], handoffs[min(n-1, n*99/100)]
	}
	return p50, p99
}

// Scenario 2: one of three Redis nodes is SIGKILLed for 8 s, then comes back empty (runNodeFault).
// Progress must continue at the offered rate (KeepUp) during and after, lock calls and heartbeats
// stay bounded (none fails, none lasts longer than the call timeout), no lease is lost, and every job
// runs exactly once, one per key at a time, in order.
func TestFault02RedisMinorityDown(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	runNodeFault(t, nodeFaultCase{name: "02 redis minority down (1 of 3 killed, back empty)", nodes: 3, during: 8 * time.Second,
		fault: func(t *testing.T, n *testenv.RedisNode) { n.Kill() },
		heal:  func(t *testing.T, n *testenv.RedisNode) { n.Restart(t) }})
}

// Scenario 3: two of three Redis nodes are SIGKILLed for 10 s while two worker processes work a keyed
// kind (40 jobs/s over 100 keys, and four long jobs that run until their lease is lost) and a plain
// kind (60 jobs/s), then come back empty. While the majority is down: no keyed job starts (after the
// kill plus LockOutageBound), the running long jobs stop within their lease (their heartbeats fail, so
// their contexts are cancelled) and are not recorded as done, the plain kind keeps the offered rate
// (KeepUp), and no process exits. After: everything resumes and every job finishes, once.
func TestFault03RedisMajorityDown(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	const (
		phase, outage = 8 * time.Second, 10 * time.Second
	)

	// Arranged: two workers run four long keyed jobs (until their lease is lost) and a steady keyed
	// and plain load; the lock probe times lock calls.
	faultkit.Reserve(t, 2)
	e := faultkit.NewRedisWorld(t, faultkit.RedisWorldSpec{Nodes: 3, Plain: true})
	longBlogs := []int64{901, 902, 903, 904}
	long, longIDs, workers := startLongJobs(t, e, longBlogs)
	// 100 jobs/s in all: after the outage the workers also catch up with its keyed backlog (400 jobs).
	load := e.StartLoad(t, faultkit.LoadSpec{Keys: 100, KeyedRate: 40, PlainRate: 60, LockProbe: true})

	// Injected: two of the three nodes killed, back empty after the outage.
	var killed time.Time
	w := e.RunPhases(t, workers, phase, outage, func() {
		e.Redis[1].Kill()
		e.Redis[2].Kill()
		killed = e.Now(t)
	}, func() {
		e.Redis[1].Restart(t)
		e.Redis[2].Restart(t)
	})
	keyed, plain := load.Stop(t)
	e.LogSeries(t, w)

	// What must hold: every job once, nothing keyed started in the outage, the long jobs stopped by
	// their lost leases and retried after it; the plain kind kept its rate, the keyed one came back;
	// lock calls bounded although all failed.
	st, figs := e.Finish(t, workers,
		faultkit.KindJobs{Table: faultkit.KeyedKind, Keyed: true, Jobs: faultkit.MergeJobs(keyed, long)},
		faultkit.KindJobs{Table: faultkit.RedisPlainKind, LedgerKind: faultkit.RedisPlainKind, Jobs: plain})
	e.CheckConc(t, nil, 1)
	lastStart, firstAfter := e.CheckNoKeyedStart(t, w.Fault, w.Heal)
	stoppedWithin := checkLongJobsStoppedByOutage(t, e, longIDs, longBlogs, w)
	checkOnlyLongJobsLostLeases(t, st, figs, len(longIDs))
	rk, rp := w.Rates(t, e.DB, ""), w.Rates(t, e.DB, faultkit.RedisPlainKind)
	if rp.During == 0 || rp.During < faultkit.KeepUp*rp.Before || rp.After < faultkit.KeepUp*rp.Before {
		t.Errorf("plain throughput before/during/after %.1f/%.1f/%.1f jobs/s: want at least %.0f%% of before while Redis is down",
			rp.Before, rp.During, rp.After, 100*faultkit.KeepUp)
	}
	if rk.After < faultkit.KeepUp*rk.Before {
		t.Errorf("keyed throughput after the outage %.1f jobs/s, want at least %.0f%% of before (%.1f)", rk.After, 100*faultkit.KeepUp, rk.Before)
	}
	locks := load.Locks.Between(killed, w.Heal)
	faultkit.CheckBounded(t, "lock calls with the majority down", locks, faultkit.LockCallTimeout+250*time.Millisecond, false)
	recovery := faultkit.RecoveryAfter(t, e.DB, "", w.Heal, w.End, 0.9*rk.Before)
	if recovery < 0 {
		t.Errorf("the keyed kind's throughput never came back to 90%% of before (%.1f jobs/s) after the outage", rk.Before)
	}
	faultkit.ReportFigures(t, "03 redis majority down (2 of 3 killed, back empty)", "outage", outage,
		"keyed before", rk.Before, "keyed during", rk.During, "keyed after", rk.After,
		"plain before", rp.Before, "plain during", rp.During, "plain after", rp.After,
		"recovery (keyed, from the restore)", recovery, "duplicates", figs[0].Duplicates+figs[1].Duplicates, "lost", figs[0].Lost+figs[1].Lost,
		"last keyed start into the outage", faultkit.SinceOrNone(lastStart, w.Fault), "first keyed start after the restore", faultkit.SinceOrNone(firstAfter, w.Heal),
		"running jobs stopped within", stoppedWithin, "leases lost", st.LeasesLost, "claims released", st.Released,
		"lock calls during", locks)
}

// startLongJobs enqueues a long job for each of longBlogs, starts two workers whose handlers of those
// blogs block on the first attempt, and waits until the long jobs run. It returns the long jobs and
// their ids, and the workers.
func startLongJobs(t *testing.T, e *faultkit.RedisWorld, longBlogs []int64) (faultkit.Enqueued, []int64, []*faultkit.Worker) {
	t.Helper()
	long := faultkit.Enqueued{}
	longIDs := e.Enqueue(t, long, longBlogs, 0, 1)
	workers := e.StartWorkers(t, func(s *faultkit.WorkerSettings) {
		faultkit.ShortJobs(s)
		// Until the lease is lost; the retry is short. By blog, not id: the plain kind's ids are the same numbers.
		s.BlockBlogs, s.BlockUpToAttempt = longBlogs, 1
	}, "w1", "w2")
	faultkit.WaitFor(t, "the long jobs running", 30*time.Second, func() bool { return len(e.Ledger(t)) == len(longIDs) })
	return long, longIDs, workers
}

// checkLongJobsStoppedByOutage checks the long jobs: stopped within their lease, not done, retried
// once after the outage. It returns how long after the kill the last one stopped.
func checkLongJobsStoppedByOutage(t *testing.T, e *faultkit.RedisWorld, longIDs, longBlogs []int64, w faultkit.Phases) time.Duration {
	t.Helper()
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
		if stopped > faultkit.RedisLeaseTTL || calls[0].EndedAt.Before(w.Fault) || !faultkit.LeaseLost(calls[0]) {
			t.Errorf("long job %d: first call %v ended %v after the kill; want its lease lost within the lease TTL %v", id, calls[0], stopped, faultkit.RedisLeaseTTL)
		}
	}
	return stoppedWithin
}

// checkOnlyLongJobsLostLeases checks that the long jobs, and they alone, lost their leases and were
// retried, and that nothing was rescued, failed, finished stale or run twice.
func checkOnlyLongJobsLostLeases(t *testing.T, st dispatcher.Stats, figs []faultkit.JobFigures, longJobs int) {
	t.Helper()
	// OutcomeLeaseLost: each long job's retry was written by its own worker, the fence still holding
	// (no stale finish: checked below).
	if figs[0].LeaseLost != longJobs || st.LeasesLost != int64(longJobs) {
		t.Errorf("lost leases: %d in the ledger, %d in the stats; want exactly the %d long jobs'", figs[0].LeaseLost, st.LeasesLost, longJobs)
	}
	if st.Rescued != 0 || st.Failed != 0 || st.StaleFinishes != 0 || figs[0].Duplicates != 0 || figs[1].Duplicates != 0 {
		t.Errorf("workers' stats %+v, duplicates %d and %d; want no rescue, failure, stale finish or duplicate", st, figs[0].Duplicates, figs[1].Duplicates)
	}
}

// Scenario 4: a Redis node is stopped (SIGSTOP) for longer than every client timeout (500 ms per node
// command, 1 s per lock call), then continued (runNodeFault), in the two cases that differ. One of three
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
		runNodeFault(t, nodeFaultCase{name: "04 redis node stalled (1 of 3)", nodes: 3, during: 8 * time.Second, fault: stall, heal: resume})
	})
	t.Run("the only node", func(t *testing.T) {
		runNodeFault(t, nodeFaultCase{name: "04 redis node stalled (the only node)", nodes: 1, during: 5 * time.Second, fault: stall, heal: resume})
	})
}

// nodeFaultCase is a fault of scenarios 2 and 4, applied to the first of a scenario's Redis nodes.
type nodeFaultCase struct {
	name        string        // the figures' scenario name
	nodes       int           // Redis nodes; with more than one the others keep a quorum
	during      time.Duration // how long the fault lasts
	fault, heal func(t *testing.T, n *testenv.RedisNode)
}

// runNodeFault runs a fault of one Redis node under two worker processes working 100 keys at a steady
// 100 jobs/s, with four probe jobs heartbeating every 200 ms and the lock probe timing lock calls
// from the test process, 8 s before the fault and 8 s after it. When the other nodes keep a quorum,
// nothing may change: the offered rate is kept (KeepUp), no lock call or heartbeat fails, no lease
// is lost, every job runs once. When the faulted node is the only one, nothing keyed may start during
// the fault (CheckNoKeyedStart), each probe job loses its lease once, and the offered rate is kept
// again after it. Always: lock calls and heartbeats bounded by the call timeout (plus slack for a
// heartbeat's database write), lock calls succeeding again within two call timeouts of the heal,
// nothing lost, no duplicate, every check of Finish.
func runNodeFault(t *testing.T, c nodeFaultCase) {
	const (
		keyedRate = 100.0
		phase     = 8 * time.Second
		probes    = 4
		lockBound = faultkit.LockCallTimeout + 250*time.Millisecond
		beatBound = faultkit.LockCallTimeout + 500*time.Millisecond
	)

	// Arranged: two workers of short jobs under a steady keyed load, probe jobs and the lock probe.
	faultkit.Reserve(t, 2)
	e := faultkit.NewRedisWorld(t, faultkit.RedisWorldSpec{Nodes: c.nodes, Probes: true})
	workers := e.StartWorkers(t, faultkit.ShortJobs, "w1", "w2")
	load := e.StartLoad(t, faultkit.LoadSpec{Keys: 100, KeyedRate: keyedRate, Probes: probes, LockProbe: true})

	// Injected: the fault on the first node, between two phases of 8 s.
	w := e.RunPhases(t, workers, phase, c.during, func() { c.fault(t, e.Redis[0]) }, func() { c.heal(t, e.Redis[0]) })
	keyed, _ := load.Stop(t)
	e.LogSeries(t, w)

	// What must hold: every job once; lock calls and heartbeats bounded; with a quorum nothing
	// changes, without one nothing keyed starts and each probe job loses its lease once; the rate
	// back after the heal.
	st, figs := e.Finish(t, workers,
		faultkit.KindJobs{Table: faultkit.KeyedKind, Keyed: true, Jobs: keyed},
		faultkit.KindJobs{Table: faultkit.ProbeKind, LedgerKind: faultkit.ProbeKind, Keyed: true, Jobs: load.Probes})
	e.CheckConc(t, nil, 1)
	quorum := c.nodes > 1
	r := w.Rates(t, e.DB, "")
	// Calls that started up to a call timeout before the fault end in it: they count as during. After
	// the heal, calls may fail until the janitor has swept once (every call timeout).
	windows := [3][2]time.Time{{w.Start, w.Fault.Add(-faultkit.LockCallTimeout)}, {w.Fault.Add(-faultkit.LockCallTimeout), w.Heal}, {w.Heal.Add(2 * faultkit.LockCallTimeout), w.End}}
	calls := e.MeasureCalls(t, load.Locks, windows, lockBound, beatBound, func(i int) bool { return quorum || i != 1 })
	if figs[0].Duplicates != 0 || figs[1].Duplicates != 0 || st.Rescued != 0 || st.Failed != 0 || st.StaleFinishes != 0 {
		t.Errorf("duplicates %d and %d, stats %+v; want no duplicate, rescue, failure or stale finish", figs[0].Duplicates, figs[1].Duplicates, st)
	}
	var lastStart, firstAfter time.Time
	if quorum {
		checkNothingChangedWithQuorum(t, st, figs, r)
	} else {
		lastStart, firstAfter = e.CheckNoKeyedStart(t, w.Fault, w.Heal)
		// Each probe job heartbeats every 200 ms: each loses its lease in the fault, once.
		if st.LeasesLost != probes || figs[1].LeaseLost != probes {
			t.Errorf("leases lost: %d in the stats, %d probe calls; want each of the %d probe jobs' once", st.LeasesLost, figs[1].LeaseLost, probes)
		}
	}
	if r.After < faultkit.KeepUp*r.Before {
		t.Errorf("keyed throughput after the fault %.1f jobs/s, want at least %.0f%% of before (%.1f)", r.After, 100*faultkit.KeepUp, r.Before)
	}
	recovery := faultkit.RecoveryAfter(t, e.DB, "", w.Heal, w.End, 0.9*r.Before)
	if recovery < 0 {
		t.Errorf("the keyed kind's throughput never came back to 90%% of before (%.1f jobs/s) after the fault", r.Before)
	}
	figures := []any{"fault", c.during, "offered", keyedRate,
		"before", r.Before, "during", r.During, "after", r.After, "recovery (from the heal)", recovery,
		"duplicates", figs[0].Duplicates + figs[1].Duplicates, "lost", figs[0].Lost + figs[1].Lost,
		"lock calls during", calls.Locks[1], "lock p99 before/during/after", faultkit.P99s(calls.Locks[:]),
		"heartbeats during", calls.Beats[1], "start lag p99 before/during/after", faultkit.P99s(calls.Lags[:])}
	if !quorum {
		figures = append(figures, "last keyed start into the fault", faultkit.SinceOrNone(lastStart, w.Fault),
			"first keyed start after the heal", faultkit.SinceOrNone(firstAfter, w.Heal))
	}
	figures = append(figures, "leases lost", st.LeasesLost, "claims released", st.Released, "lock attempts unavailable", st.Locks.Unavailable)
	faultkit.ReportFigures(t, c.name, figures...)
}

// checkNothingChangedWithQuorum checks that with the other nodes keeping a quorum no lease was lost
// or retried, every job ran once, and the offered rate was kept during the fault.
func checkNothingChangedWithQuorum(t *testing.T, st dispatcher.Stats, figs []faultkit.JobFigures, r faultkit.PhaseRates) {
	t.Helper()
	if st.LeasesLost != 0 || st.Retried != 0 || figs[0].Calls != figs[0].Jobs {
		t.Errorf("stats %+v, keyed jobs %+v; want no lease lost or retry, every job run once", st, figs[0])
	}
	if r.During < faultkit.KeepUp*r.Before {
		t.Errorf("keyed throughput during the fault %.1f jobs/s, want at least %.0f%% of before (%.1f): the other nodes keep a quorum",
			r.During, 100*faultkit.KeepUp, r.Before)
	}
}

// Scenario 5: a job holds its key's execution lock in worker wa when two of the three Redis nodes
// restart empty: Redis forgets the lock, and a second holder takes it (CheckFenceAfterRedisLoss). wa
// is stopped (SIGSTOP) just before, like a process in a long pause, so that it cannot notice; wb works
// a steady feed on other keys meanwhile. The database must refuse every claim of the key while wa's
// lease lasts (its row holds the slot), then the rescue takes the job back and wb runs it again; when
// wa resumes, its write for the job (a stale token) must change nothing: the row stays wb's, running.
// Removing the token fence from the finish makes that write land on wb's running row, which this test
// reports through the row, the audit (CheckAudit) and the ledger (CheckJobs).
func TestFault05RedisRestartedEmpty(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	const (
		blog     = 500
		leaseTTL = 4 * time.Second
		phase    = 6 * time.Second
	)

	// Arranged: wa runs the held job (it blocks) and nothing else; wb works a steady feed on other keys.
	sc := arrangeHeldJob(t, blog, leaseTTL)
	load := sc.e.StartLoad(t, faultkit.LoadSpec{Keys: 50, KeyedRate: 60})

	// Injected: wa stopped and the lock forgotten (two nodes restarted empty); wa woken once wb runs
	// the job again.
	w := sc.e.RunPhases(t, sc.workers, phase, 0, func() { sc.stopHolderAndForgetLock(t) }, func() { sc.wakeHolder(t) })
	keyed, _ := load.Stop(t)
	sc.e.LogSeries(t, w)

	// What must hold: every job once; wa's frozen attempt the only one beside wb's; the held job run
	// twice, then the key's next; wa's write refused, nothing else stale.
	e := sc.e
	st, figs := e.Finish(t, sc.workers, faultkit.KindJobs{Table: faultkit.KeyedKind, Keyed: true, Jobs: faultkit.MergeJobs(keyed, sc.held)})
	sc.checkFrozenAttemptBesideRerun(t, figs[0])
	sc.checkJobRanTwiceThenNext(t)
	sa := sc.checkOnlyHolderStale(t, st, figs[0])
	r := w.Rates(t, e.DB, "")
	if r.During < faultkit.KeepUp*r.Before || r.After < faultkit.KeepUp*r.Before {
		t.Errorf("throughput of the other keys before/during/after %.1f/%.1f/%.1f jobs/s: want at least %.0f%% of before",
			r.Before, r.During, r.After, 100*faultkit.KeepUp)
	}
	faultkit.ReportFigures(t, "05 redis restarted empty under a running job",
		"before", r.Before, "during", r.During, "after", r.After,
		"recovery (the key's job running again)", sc.second.StartedAt.Sub(w.Fault), "duplicates", figs[0].Duplicates, "lost", figs[0].Lost,
		"wa's lease ran out after", sc.leaseEnd.Sub(w.Fault), "stale finishes refused", sa.StaleFinishes, "rescued", st.Rescued,
		"claims refused", st.ClaimsRefused, "stale overlaps", figs[0].StaleOverlaps)
}

// heldJob is scenario 5's world: the held job (whose every attempt blocks until released) and the
// next job of its key, wa running the first, and wb.
type heldJob struct {
	e         *faultkit.RedisWorld
	blog      int64
	held      faultkit.Enqueued
	job, next int64
	wa, wb    *faultkit.Worker
	workers   []*faultkit.Worker
	first     faultkit.Call // the held job's attempt in wa
	leaseEnd  time.Time     // when wa's lease of it ran out
	second    faultkit.Call // its attempt in wb
}

// arrangeHeldJob starts wa, which runs the held job and nothing else (Concurrency 1), so that its
// stop freezes that job alone; then wb.
func arrangeHeldJob(t *testing.T, blog int64, leaseTTL time.Duration) *heldJob {
	t.Helper()
	faultkit.Reserve(t, 2)
	sc := &heldJob{e: faultkit.NewRedisWorld(t, faultkit.RedisWorldSpec{Nodes: 3}), blog: blog, held: faultkit.Enqueued{}}
	e := sc.e
	ids := e.Enqueue(t, sc.held, []int64{blog}, 0, 2)
	sc.job, sc.next = ids[0], ids[1]
	set := func(s *faultkit.WorkerSettings) {
		faultkit.ShortJobs(s)
		s.LeaseTTL = leaseTTL
		s.RescueInterval, s.LeaderTTL = 200*time.Millisecond, 2*time.Second // wa may lead the rescue: it lapses soon
		s.PollInterval = 200 * time.Millisecond
		s.BlockIDs = []int64{sc.job} // every attempt, until released
	}
	sc.wa = e.StartWorkers(t, func(s *faultkit.WorkerSettings) { set(s); s.Concurrency = 1 }, "wa")[0]
	faultkit.WaitFor(t, "the held job to start in wa", 30*time.Second, func() bool { return len(e.CallsOf(t, sc.job)) == 1 })
	sc.first = e.CallsOf(t, sc.job)[0]
	sc.wb = e.StartWorkers(t, set, "wb")[0]
	sc.workers = []*faultkit.Worker{sc.wa, sc.wb}
	return sc
}

// stopHolderAndForgetLock stops wa (SIGSTOP) and restarts two of the three nodes empty, shows that
// Redis now lets a second holder take the lock but the database does not, and waits until wb runs
// the job again: only once wa's lease has run out, and nothing else of the key meanwhile.
func (sc *heldJob) stopHolderAndForgetLock(t *testing.T) {
	t.Helper()
	e := sc.e
	faultkit.Signal(t, sc.wa, syscall.SIGSTOP)
	e.Redis[0].Restart(t)
	e.Redis[1].Restart(t)
	e.CheckFenceAfterRedisLoss(t, sc.blog, sc.first.Slot)
	row := e.Row(t, sc.job)
	if row.LeaseOwner == nil || *row.LeaseOwner != "wa" || row.Token != sc.first.Token || row.LeaseExpiresAt == nil {
		t.Fatalf("the held job after the restart: %+v; want still leased by wa with token %d", row, sc.first.Token)
	}
	sc.leaseEnd = *row.LeaseExpiresAt
	faultkit.WaitFor(t, "the held job's second attempt to start", 30*time.Second, func() bool {
		calls := e.CallsOf(t, sc.job)
		if len(calls) > 1 {
			sc.second = calls[1]
		}
		return len(calls) > 1
	})
	if sc.second.Node != "wb" || sc.second.Attempt != 2 || sc.second.Token <= sc.first.Token || !sc.second.StartedAt.After(sc.leaseEnd) {
		t.Errorf("second attempt %v; want attempt 2 in wb, with a greater token, after wa's lease ended at %v", sc.second, sc.leaseEnd)
	}
	if s := e.Starts(t, sc.blog); len(s) != 2 {
		t.Errorf("blog %d: %d handler calls, want the held job's two: %v", sc.blog, len(s), s)
	}
}

// wakeHolder continues wa (SIGCONT), checks that its stale attempt ended by its lost lease and that
// its write changed nothing of the row wb holds, then lets wb's attempt end.
func (sc *heldJob) wakeHolder(t *testing.T) {
	t.Helper()
	e := sc.e
	faultkit.Signal(t, sc.wa, syscall.SIGCONT)
	faultkit.WaitFor(t, "wa's stale attempt to end", 15*time.Second, func() bool { return e.CallsOf(t, sc.job)[0].EndedAt != nil })
	time.Sleep(time.Second) // its outcome goes to wa's finisher, which writes it (or fails to) at once
	if stale := e.CallsOf(t, sc.job)[0]; !faultkit.LeaseLost(stale) {
		t.Errorf("wa's attempt %v; want it ended by its lost lease", stale)
	}
	row := e.Row(t, sc.job)
	if row.LeaseOwner == nil || *row.LeaseOwner != "wb" || row.Token != sc.second.Token || row.LeaseExpiresAt == nil || row.Processed {
		t.Errorf("the held job after wa resumed: %+v; want still running in wb with token %d: wa's stale write changed it", row, sc.second.Token)
	}
	var changed int
	if err := e.DB.QueryRow(context.Background(), `SELECT count(*) FROM fault_audit WHERE kind = $1 AND job_id = $2 AND at > $3
			AND (new_state <> old_state OR new_token <> old_token OR new_owner IS DISTINCT FROM old_owner)`,
		faultkit.KeyedKind, sc.job, sc.second.StartedAt).Scan(&changed); err != nil {
		t.Fatal(err)
	}
	if changed != 0 {
		t.Errorf("the held job's row changed %d times while wb ran it", changed)
	}
	e.Release(t, sc.job)
}

// checkFrozenAttemptBesideRerun checks that wa's frozen attempt counted as running in mp_conc, in its
// slot, until it resumed and recorded its end, beside wb's in the same slot: a stale holder whose
// lease the rescue had taken back (CheckJobs exempts it from the key's one-at-a-time check, and
// counts it). Every other blog: CheckConc.
func (sc *heldJob) checkFrozenAttemptBesideRerun(t *testing.T, fig faultkit.JobFigures) {
	t.Helper()
	e := sc.e
	if c := e.Conc(t)[sc.blog]; c.Running != 0 || c.MaxSeen != 2 || c.SlotClashes != 1 || fig.StaleOverlaps != 1 {
		t.Errorf("blog %d: %+v, %d stale overlaps; want exactly wa's frozen attempt beside wb's", sc.blog, c, fig.StaleOverlaps)
	}
	if _, err := e.DB.Exec(context.Background(), `DELETE FROM mp_conc WHERE blog_id = $1`, sc.blog); err != nil {
		t.Fatal(err)
	}
	e.CheckConc(t, nil, 1)
}

// checkJobRanTwiceThenNext checks the held job's two attempts (wa's lost, wb's ok, the row processed
// with wb's token), and that the key's next job ran once, after it.
func (sc *heldJob) checkJobRanTwiceThenNext(t *testing.T) {
	t.Helper()
	e := sc.e
	calls := e.CallsOf(t, sc.job)
	if row := e.Row(t, sc.job); len(calls) != 2 || calls[1].Outcome == nil || *calls[1].Outcome != "ok" || !row.Processed ||
		row.Attempts != 2 || row.Token != sc.second.Token {
		t.Errorf("the held job: calls %v, row %+v; want wa's lost attempt, then wb's ok, processed with token %d", calls, row, sc.second.Token)
	}
	nextCalls := e.CallsOf(t, sc.next)
	if len(nextCalls) != 1 || !nextCalls[0].StartedAt.After(*calls[len(calls)-1].EndedAt) {
		t.Errorf("the key's next job: calls %v; want one, after the held job ended", nextCalls)
	}
}

// checkOnlyHolderStale checks that wa lost one lease and had one finish refused, wb neither, and that
// one job was rescued and none failed or ran twice. It returns wa's stats.
func (sc *heldJob) checkOnlyHolderStale(t *testing.T, st dispatcher.Stats, fig faultkit.JobFigures) *dispatcher.Stats {
	t.Helper()
	sa, sb := sc.wa.Stats(), sc.wb.Stats()
	if sa == nil || sb == nil {
		t.Fatalf("a worker reported no stats: wa %v, wb %v", sa, sb)
	}
	// wa's attempt lost its lease and its row had moved on when its outcome came: one stale finish.
	if sa.StaleFinishes != 1 || sa.LeasesLost != 0 || sb.StaleFinishes != 0 || sb.LeasesLost != 0 ||
		st.Rescued != 1 || st.Failed != 0 || fig.Duplicates != 0 {
		t.Errorf("stats wa %+v, wb %+v, duplicates %d; want wa's lost lease ending in one stale finish refused, one rescue, nothing else", sa, sb, fig.Duplicates)
	}
	return sa
}
