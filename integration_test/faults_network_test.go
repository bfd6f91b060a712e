package integration_test

// The fault suite's network scenarios, beyond the fourteen of docs/reliability.md's table: latency and partitions
// injected with toxiproxy (internal/netfault) between the worker processes and their servers, where
// the other scenarios stop, kill or restart the servers themselves. 15 slows a link: one Redis node
// of three, or PostgreSQL. 16 partitions one worker: held off from PostgreSQL (nothing passes, and
// what it sent is delivered late, after the heal), or cut off from every Redis node (its
// connections reset, new ones refused). The test's own connections and the handlers' ledger never go
// through a link, so the witness sees what happened as it happened.

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
	"github.com/jobpipe/jobpipe/internal/netfault"
)

// Scenario 15: latency on a link, for 8 s between 8 s before and after, under two worker processes
// working 100 keys at a steady 100 jobs/s with four probe jobs heartbeating every 200 ms (as in
// scenarios 2 and 4). Two links are slowed, each in a case of its own:
//   - one of three Redis nodes, +50 ms (±10 ms) each way, for both workers and the test's lock probe:
//     a quorum answers without that node, so lock calls must not wait for it (their p99 stays below
//     the added round trip), none fails, no lease is lost, and the rate offered is kept;
//   - PostgreSQL, +10 ms each way, for both workers (the ledger is written on a direct connection):
//     every statement takes a 20 ms round trip more, which the heartbeats show (their p50 grows by
//     it), but the workers keep the rate offered, lose no lease and run every job once.
//
// Each case checks that the fault took effect (a round trip through the link while it is slowed
// takes at least the added latency, twice), and ends as every scenario does: nothing lost, no
// duplicate, one job per key at a time and in order, SIGTERM exits within 10 s, nothing left leased
// or locked.
func TestFault15NetworkLatency(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	t.Run("one redis node of three", func(t *testing.T) {
		runLatency(t, latencyCase{name: "15 latency on one redis node of 3 (+50ms each way)", redis: true,
			latency: 50 * time.Millisecond, jitter: 10 * time.Millisecond})
	})
	t.Run("postgres", func(t *testing.T) {
		runLatency(t, latencyCase{name: "15 latency on postgres (+10ms each way)", latency: 10 * time.Millisecond})
	})
}

// latencyCase is one link scenario 15 slows.
type latencyCase struct {
	name            string
	redis           bool // the first Redis node's link; else PostgreSQL's
	latency, jitter time.Duration
}

// runLatency runs one case of scenario 15.
func runLatency(t *testing.T, c latencyCase) {
	const (
		keyedRate = 100.0
		phase     = 8 * time.Second
		during    = 8 * time.Second
		probes    = 4
		lockBound = faultkit.LockCallTimeout + 250*time.Millisecond
		beatBound = faultkit.LockCallTimeout + 500*time.Millisecond
	)

	// Arranged: two workers of short jobs, which reach the slowed server through the link, under a
	// steady keyed load, probe jobs and the lock probe.
	faultkit.Reserve(t, 2)
	e := faultkit.NewRedisWorld(t, faultkit.RedisWorldSpec{Nodes: 3, Probes: true})
	link, linkURL := startSlowedLink(t, e, c.redis)
	workers := e.StartWorkers(t, func(s *faultkit.WorkerSettings) {
		faultkit.ShortJobs(s)
		if linkURL != "" {
			s.DatabaseURL = linkURL
			s.LedgerURL = e.Schema.URL
		}
	}, "w1", "w2")
	load := e.StartLoad(t, faultkit.LoadSpec{Keys: 100, KeyedRate: keyedRate, Probes: probes, LockProbe: true})

	// Injected: the latency on the link for 8 s, between two phases of 8 s; a round trip timed once
	// it is in force and once it is healed.
	var slowed, healed time.Duration
	w := e.RunPhases(t, workers, phase, during, func() {
		if err := link.Delay(c.latency, c.jitter); err != nil {
			t.Fatal(err)
		}
		slowed = faultkit.RoundTrip(t, link, linkURL)
	}, func() {
		if err := link.Heal(); err != nil {
			t.Fatal(err)
		}
		healed = faultkit.RoundTrip(t, link, linkURL)
	})
	keyed, _ := load.Stop(t)
	e.LogSeries(t, w)

	// What must hold: the latency was in force; every job once; no lock call or heartbeat failed or
	// outlasted its bound, and the slowed link shows where it should; nothing lost, retried or
	// rescued; the rate kept throughout.
	added := 2 * (c.latency - c.jitter) // the least a round trip gains
	if slowed < added {
		t.Errorf("a round trip through the slowed link took %v, want at least %v: the latency was not in force", slowed, added)
	}
	st, figs := e.Finish(t, workers,
		faultkit.KindJobs{Table: faultkit.KeyedKind, Keyed: true, Jobs: keyed},
		faultkit.KindJobs{Table: faultkit.ProbeKind, LedgerKind: faultkit.ProbeKind, Keyed: true, Jobs: load.Probes})
	e.CheckConc(t, nil, 1)
	r := w.Rates(t, e.DB, "")
	windows := [3][2]time.Time{{w.Start, w.Fault}, {w.Fault, w.Heal}, {w.Heal, w.End}}
	calls := e.MeasureCalls(t, load.Locks, windows, lockBound, beatBound, func(int) bool { return true })
	checkSlowLinkShows(t, c, calls, added)
	if figs[0].Duplicates != 0 || figs[1].Duplicates != 0 || st.Rescued != 0 || st.Failed != 0 || st.StaleFinishes != 0 ||
		st.LeasesLost != 0 || st.Retried != 0 || figs[0].Calls != figs[0].Jobs {
		t.Errorf("duplicates %d and %d, stats %+v, keyed jobs %+v; want no duplicate, rescue, failure, stale finish, lease lost or retry, every job run once",
			figs[0].Duplicates, figs[1].Duplicates, st, figs[0])
	}
	if r.During < faultkit.KeepUp*r.Before || r.After < faultkit.KeepUp*r.Before {
		t.Errorf("keyed throughput before/during/after %.1f/%.1f/%.1f jobs/s: want at least %.0f%% of before throughout", r.Before, r.During, r.After, 100*faultkit.KeepUp)
	}
	faultkit.ReportFigures(t, c.name, "fault", during, "offered", keyedRate, "round trip through the link slowed/healed", faultkit.JoinDurations(slowed, healed),
		"before", r.Before, "during", r.During, "after", r.After,
		"duplicates", figs[0].Duplicates+figs[1].Duplicates, "lost", figs[0].Lost+figs[1].Lost,
		"lock calls during", calls.Locks[1], "lock p99 before/during/after", faultkit.P99s(calls.Locks[:]),
		"heartbeats during", calls.Beats[1], "heartbeat p50 before/during/after", faultkit.P50s(calls.Beats[:]),
		"start lag p99 before/during/after", faultkit.P99s(calls.Lags[:]), "leases lost", st.LeasesLost, "claims released", st.Released)
}

// startSlowedLink starts the link the case slows: to the first Redis node, which the workers and the
// lock probe then reach through it (CheckQuiet still looks at the node directly, e.Nodes), or to
// PostgreSQL, whose URL through the link it returns.
func startSlowedLink(t *testing.T, e *faultkit.RedisWorld, redis bool) (link *netfault.Link, linkURL string) {
	t.Helper()
	if redis {
		link = faultkit.StartLink(t, "redis node 1", e.Addrs[0])
		e.Addrs = append([]string{link.Addr()}, e.Addrs[1:]...)
		return link, ""
	}
	link = faultkit.StartLink(t, "postgres", faultkit.PostgresAddr(t, e.Schema.URL))
	return link, faultkit.Via(t, e.Schema.URL, link.Addr())
}

// checkSlowLinkShows checks where the slow link must show, and where not: a slow Redis node of
// three does not slow lock calls, a slow PostgreSQL slows every heartbeat by its round trip.
func checkSlowLinkShows(t *testing.T, c latencyCase, calls faultkit.CallLatencies, added time.Duration) {
	t.Helper()
	if c.redis {
		// A quorum of two answers at the speed of the fast nodes: the slow one's answers come later,
		// in the background, and the call does not wait for them.
		if calls.Locks[1].P99 >= 2*c.latency {
			t.Errorf("lock calls with one slow node of three: %v; want p99 below the slow node's added round trip (%v): a quorum answers without it", calls.Locks[1], 2*c.latency)
		}
	} else if calls.Beats[1].P50 < calls.Beats[0].P50+added {
		t.Errorf("heartbeats' p50 %v during, %v before; want at least %v more: each renews the row's lease through the slowed link", calls.Beats[1].P50, calls.Beats[0].P50, added)
	}
}

// Scenario 16: one worker partitioned, for 12 s, from one of its servers, while two worker
// processes work a keyed kind (60 jobs/s over 100 keys, plus four long jobs that the partitioned
// worker, w1, started before the other, w2, and that run until their lease is lost or the test
// releases them, a second after the heal) and a plain kind (40 jobs/s). Leases last 6 s and
// maintenance leadership 4 s, so that leadership moves within the partition wherever it was. Two
// partitions, each in a case of its own:
//   - w1 held off from PostgreSQL: nothing passes either way, its connections stay open, and what it
//     sent meanwhile reaches the server after the heal (late claims, renewals and finishes, all
//     fenced). Its long jobs must stop within their lease (the renewals do not come back), and w2
//     must take them back and run them during the partition; no job starts on w1 meanwhile, a job
//     w1 had run whose finish was held runs again only after a proven lease loss, and w1's retries
//     of its long jobs, arriving while w2's attempts hold the rows, change nothing (stale finishes).
//     Without the token fence they would send w2's running rows back to wait: the audit fails.
//   - w1 cut off from every Redis node: its connections reset, new ones refused. Its long jobs must
//     stop within a heartbeat and a call timeout (their lock cannot be extended), and run again on
//     w2 once their locks expire; no keyed job may start on w1 during the cut (it cannot take a
//     lock), while w1 keeps working the plain kind, which needs no lock. Nothing runs twice.
//
// In both, w1 must not exit, both kinds keep at least 80% of their offered rate during the partition
// and after it, and the scenario ends as every scenario does: nothing lost, one job per key at a time
// and in order, SIGTERM exits within 10 s, nothing left leased or locked.
func TestFault16NetworkPartition(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	t.Run("worker held off from postgres", func(t *testing.T) {
		runPartition(t, partitionCase{name: "16 partition: a worker held off from postgres", postgres: true})
	})
	t.Run("worker cut off from redis", func(t *testing.T) {
		runPartition(t, partitionCase{name: "16 partition: a worker cut off from redis (3 of 3 nodes)"})
	})
}

// partitionCase is one partition of scenario 16.
type partitionCase struct {
	name     string
	postgres bool // hold w1's link to PostgreSQL; else cut its links to every Redis node
}

// runPartition runs one case of scenario 16.
func runPartition(t *testing.T, c partitionCase) {
	const (
		phase, partition = 8 * time.Second, 12 * time.Second
		keyedRate        = 60.0
		plainRate        = 40.0
		leaderTTL        = 4 * time.Second
		heartbeatEvery   = faultkit.RedisLeaseTTL / 3 // the default HeartbeatInterval
	)

	// Arranged: w1, which reaches its servers through links, runs four long keyed jobs; w2 joins it
	// under a steady keyed and plain load.
	faultkit.Reserve(t, 2)
	e := faultkit.NewRedisWorld(t, faultkit.RedisWorldSpec{Nodes: 3, Plain: true})
	long := faultkit.Enqueued{}
	longBlogs := []int64{901, 902, 903, 904}
	longIDs := e.Enqueue(t, long, longBlogs, 0, 1)
	p := startPartitionLinks(t, e, c.postgres, heartbeatEvery)
	workers := startW1ThenW2(t, e, p, leaderTTL, longBlogs, len(longIDs))
	load := e.StartLoad(t, faultkit.LoadSpec{Keys: 100, KeyedRate: keyedRate, PlainRate: plainRate})

	// Injected: w1 partitioned for 12 s; the long jobs released a second after the heal, while what
	// w1 sent during the partition arrives.
	w := e.RunPhases(t, workers, phase, partition, func() { p.partition(t, c.postgres) }, func() {
		p.heal(t)
		// The long jobs' second attempts still hold their rows when what w1 sent during the partition
		// arrives: its late writes must change nothing (the fence) while they run.
		time.Sleep(time.Second)
		for _, id := range longIDs {
			e.Release(t, id)
		}
	})
	keyed, plain := load.Stop(t)
	e.LogSeries(t, w)

	// What must hold: every job once (a duplicate only after a proven lease loss); the long jobs moved
	// to w2 within their bound; nothing keyed started on w1, nothing at all when held off; both kinds
	// kept their rate; w1's late writes refused.
	st, figs := e.Finish(t, workers,
		faultkit.KindJobs{Table: faultkit.KeyedKind, Keyed: true, Jobs: faultkit.MergeJobs(keyed, long)},
		faultkit.KindJobs{Table: faultkit.RedisPlainKind, LedgerKind: faultkit.RedisPlainKind, Jobs: plain})
	e.CheckConc(t, nil, 1)
	stoppedWithin, rerunAfter := checkLongJobsMovedToW2(t, e, longIDs, longBlogs, w, p.lostWithin)
	w1Keyed, w1Plain := checkW1StartsWhilePartitioned(t, e, w, c.postgres)
	rk, rp := w.Rates(t, e.DB, ""), w.Rates(t, e.DB, faultkit.RedisPlainKind)
	// The partition takes w1's share away until its claims' leases run out (held off) or the
	// execution locks it could not release expire (cut off): a few keys stall for up to a lease, and
	// w2 catches up with them within the window.
	for _, k := range []struct {
		name string
		r    faultkit.PhaseRates
	}{{"keyed", rk}, {"plain", rp}} {
		if k.r.During < faultkit.KeepUp*k.r.Before || k.r.After < faultkit.KeepUp*k.r.Before {
			t.Errorf("%s throughput before/during/after %.1f/%.1f/%.1f jobs/s; want at least %.0f%% of before during the partition and after",
				k.name, k.r.Before, k.r.During, k.r.After, 100*faultkit.KeepUp)
		}
	}
	// CheckJobs (in Finish) has already proven each duplicate's lease loss; cut off from Redis,
	// w1 still writes its outcomes, so there may be none.
	if st.Failed != 0 || (!c.postgres && (figs[0].Duplicates != 0 || figs[1].Duplicates != 0 || st.Rescued != 0)) {
		t.Errorf("stats %+v, duplicates %d and %d; want no job failed, and with w1 cut off from Redis no rescue or duplicate", st, figs[0].Duplicates, figs[1].Duplicates)
	}
	recovery := faultkit.RecoveryAfter(t, e.DB, "", w.Heal, w.End, 0.9*rk.Before)
	if recovery < 0 {
		t.Errorf("the keyed kind's throughput never came back to 90%% of before (%.1f jobs/s) after the partition", rk.Before)
	}
	w1Leases, w1Stale := checkW1LateWrites(t, workers[0], c.postgres, len(longIDs))
	faultkit.ReportFigures(t, c.name, "partition", partition,
		"keyed before", rk.Before, "keyed during", rk.During, "keyed after", rk.After,
		"plain before", rp.Before, "plain during", rp.During, "plain after", rp.After,
		"recovery (keyed, from the heal)", recovery,
		"duplicates", figs[0].Duplicates+figs[1].Duplicates, "lost", figs[0].Lost+figs[1].Lost,
		"long jobs stopped on w1 within", stoppedWithin, "long jobs running again on w2 after", rerunAfter,
		"w1 plain starts while partitioned", w1Plain, "w1 keyed starts while partitioned", w1Keyed,
		"w1 leases lost", w1Leases, "w1 stale finishes refused", w1Stale,
		"rescued", st.Rescued, "retried", st.Retried, "claims released", st.Released)
}

// partitionLinks are w1's links: to PostgreSQL, or to each Redis node.
type partitionLinks struct {
	links   []*netfault.Link
	w1URL   string   // w1's database URL through its link ("": direct)
	w1Redis []string // w1's Redis nodes, through their links or direct
	// lostWithin bounds how long after the partition began w1's long jobs lose their lease.
	lostWithin time.Duration
}

// startPartitionLinks starts w1's links to PostgreSQL (postgres) or to every Redis node.
func startPartitionLinks(t *testing.T, e *faultkit.RedisWorld, postgres bool, heartbeatEvery time.Duration) partitionLinks {
	t.Helper()
	p := partitionLinks{w1Redis: e.Addrs}
	// Held off, a long job's lease runs out by w1's clock: its renewals never come back. Cut off,
	// the first renewal after the cut fails to extend the lock.
	p.lostWithin = faultkit.RedisLeaseTTL + 500*time.Millisecond
	if postgres {
		p.links = append(p.links, faultkit.StartLink(t, "postgres", faultkit.PostgresAddr(t, e.Schema.URL)))
		p.w1URL = faultkit.Via(t, e.Schema.URL, p.links[0].Addr())
	} else {
		p.w1Redis = nil
		for i, a := range e.Addrs {
			p.links = append(p.links, faultkit.StartLink(t, fmt.Sprintf("redis node %d", i+1), a))
			p.w1Redis = append(p.w1Redis, p.links[i].Addr())
		}
		p.lostWithin = heartbeatEvery + faultkit.LockCallTimeout + 500*time.Millisecond
	}
	return p
}

// partition holds every link (postgres: nothing passes, what w1 sent arrives after the heal) or
// cuts it (connections reset, new ones refused).
func (p partitionLinks) partition(t *testing.T, postgres bool) {
	t.Helper()
	for _, l := range p.links {
		var err error
		if postgres {
			err = l.Hold()
		} else {
			err = l.Cut()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// heal lets everything through every link again.
func (p partitionLinks) heal(t *testing.T) {
	t.Helper()
	for _, l := range p.links {
		if err := l.Heal(); err != nil {
			t.Fatal(err)
		}
	}
}

// startW1ThenW2 starts w1 (through its links), waits until it runs the long jobs, then starts w2.
// Every attempt of a long job blocks until its lease is lost or the test releases it after the
// heal; by blog, not id: the plain kind's ids are the same numbers.
func startW1ThenW2(t *testing.T, e *faultkit.RedisWorld, p partitionLinks, leaderTTL time.Duration, longBlogs []int64, longJobs int) []*faultkit.Worker {
	t.Helper()
	settings := func(s *faultkit.WorkerSettings) {
		faultkit.ShortJobs(s)
		s.LeaderTTL = leaderTTL
		s.BlockBlogs = longBlogs
	}
	workers := e.StartWorkers(t, func(s *faultkit.WorkerSettings) {
		settings(s)
		s.RedisAddrs = p.w1Redis
		if p.w1URL != "" {
			s.DatabaseURL = p.w1URL
			s.LedgerURL = e.Schema.URL
		}
	}, "w1")
	faultkit.WaitFor(t, "the long jobs running on w1", 30*time.Second, func() bool { return len(e.Ledger(t)) == longJobs })
	return append(workers, e.StartWorkers(t, settings, "w2")...)
}

// checkLongJobsMovedToW2 checks the long jobs: stopped on w1 within their bound, run again on w2
// during the partition, once. It returns how long after the partition began the last stopped on w1,
// and the last started again on w2.
func checkLongJobsMovedToW2(t *testing.T, e *faultkit.RedisWorld, longIDs, longBlogs []int64, w faultkit.Phases, lostWithin time.Duration) (stoppedWithin, rerunAfter time.Duration) {
	t.Helper()
	for i, id := range longIDs {
		calls := e.Starts(t, longBlogs[i])
		if len(calls) != 2 || calls[0].Node != "w1" || calls[0].EndedAt == nil || !faultkit.LeaseLost(calls[0]) ||
			calls[1].Node != "w2" || calls[1].Attempt != 2 || calls[1].Outcome == nil || *calls[1].Outcome != "ok" ||
			calls[1].StartedAt.Before(w.Fault) || !calls[1].StartedAt.Before(w.Heal) {
			t.Errorf("long job %d: calls %v; want w1's ended by its lost lease, then w2's second attempt, started during the partition, ok once released", id, calls)
			continue
		}
		stopped := calls[0].EndedAt.Sub(w.Fault)
		stoppedWithin = max(stoppedWithin, stopped)
		rerunAfter = max(rerunAfter, calls[1].StartedAt.Sub(w.Fault))
		if stopped < 0 || stopped > lostWithin {
			t.Errorf("long job %d: w1's call ended %v after the partition began; want its lease lost within %v", id, stopped, lostWithin)
		}
		if row := e.Row(t, id); !row.Processed || row.Attempts != 2 {
			t.Errorf("long job %d: row %+v; want processed on attempt 2", id, row)
		}
	}
	return stoppedWithin, rerunAfter
}

// checkW1StartsWhilePartitioned checks what w1 started while partitioned (after a claim made just
// before could still start): no keyed job, and plain jobs exactly when it still reached PostgreSQL.
// It returns how many of each it started.
func checkW1StartsWhilePartitioned(t *testing.T, e *faultkit.RedisWorld, w faultkit.Phases, postgres bool) (w1Keyed, w1Plain int) {
	t.Helper()
	for _, m := range e.Ledger(t) {
		if m.Node != "w1" || m.StartedAt.Before(w.Fault.Add(faultkit.LockOutageBound)) || !m.StartedAt.Before(w.Heal) {
			continue
		}
		if m.BlogID >= faultkit.RedisPlainBlogBase && m.BlogID < faultkit.ProbeBlogBase {
			w1Plain++
		} else {
			w1Keyed++
		}
	}
	if w1Keyed != 0 {
		t.Errorf("w1 started %d keyed jobs while partitioned (from %v after it began); want none", w1Keyed, faultkit.LockOutageBound)
	}
	switch {
	case postgres && w1Plain != 0:
		t.Errorf("w1 started %d plain jobs while held off from PostgreSQL; want none: it cannot claim", w1Plain)
	case !postgres && w1Plain == 0:
		t.Errorf("w1 started no plain job while cut off from Redis; want it to keep working the kind that needs no lock")
	}
	return w1Keyed, w1Plain
}

// checkW1LateWrites checks what became of w1's outcomes for its long jobs: held off, its retries
// arrived after the heal and were refused by the fence; cut off, it wrote them itself. It returns
// w1's lost leases and refused finishes.
func checkW1LateWrites(t *testing.T, w1 *faultkit.Worker, postgres bool, longJobs int) (w1Leases, w1Stale int64) {
	t.Helper()
	if s := w1.Stats(); s != nil {
		w1Leases, w1Stale = s.LeasesLost, s.StaleFinishes
	}
	if postgres && w1Stale < int64(longJobs) {
		t.Errorf("w1's stale finishes %d; want at least its %d long jobs' retries, delivered after the heal and refused by the fence", w1Stale, longJobs)
	}
	// A lost lease whose outcome the fence accepted is a retry w1 wrote itself (OutcomeLeaseLost).
	if !postgres && (w1Leases != int64(longJobs) || w1Stale != 0) {
		t.Errorf("w1's lost leases %d, stale finishes %d; want the %d long jobs' retries, each written by w1 itself (it still reaches PostgreSQL)", w1Leases, w1Stale, longJobs)
	}
	return w1Leases, w1Stale
}
