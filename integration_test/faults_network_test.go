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

func runLatency(t *testing.T, c latencyCase) {
	const (
		keyedRate = 100.0
		phase     = 8 * time.Second
		during    = 8 * time.Second
		probes    = 4
		lockBound = faultkit.LockCallTimeout + 250*time.Millisecond
		beatBound = faultkit.LockCallTimeout + 500*time.Millisecond
	)
	faultkit.Reserve(t, 2)
	e := faultkit.NewRedisWorld(t, faultkit.RedisWorldSpec{Nodes: 3, Probes: true})
	var link *netfault.Link
	var linkURL string // the database's URL through the link (PostgreSQL's case)
	if c.redis {
		link = faultkit.StartLink(t, "redis node 1", e.Addrs[0])
		// The workers and the lock probe reach the first node through the link; CheckQuiet still
		// looks at it directly (e.nodes).
		e.Addrs = append([]string{link.Addr()}, e.Addrs[1:]...)
	} else {
		link = faultkit.StartLink(t, "postgres", faultkit.PostgresAddr(t, e.Schema.URL))
		linkURL = faultkit.Via(t, e.Schema.URL, link.Addr())
	}
	workers := e.StartWorkers(t, func(s *faultkit.WorkerSettings) {
		faultkit.ShortJobs(s)
		if linkURL != "" {
			s.DatabaseURL = linkURL
			s.LedgerURL = e.Schema.URL
		}
	}, "w1", "w2")
	load := e.StartLoad(t, faultkit.LoadSpec{Keys: 100, KeyedRate: keyedRate, Probes: probes, LockProbe: true})
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
	var locks, beats, lags [3]faultkit.Latency
	for i, phase := range []string{"before", "during", "after"} {
		locks[i] = load.Locks.Between(windows[i][0], windows[i][1])
		beats[i] = e.Heartbeats(t, windows[i][0], windows[i][1])
		lags[i] = e.StartLag(t, windows[i][0], windows[i][1])
		faultkit.CheckBounded(t, "lock calls "+phase, locks[i], lockBound, true)
		faultkit.CheckBounded(t, "heartbeats "+phase, beats[i], beatBound, true)
	}
	if c.redis {
		// A quorum of two answers at the speed of the fast nodes: the slow one's answers come later,
		// in the background (execlock's gates), and the call does not wait for them.
		if locks[1].P99 >= 2*c.latency {
			t.Errorf("lock calls with one slow node of three: %v; want p99 below the slow node's added round trip (%v): a quorum answers without it", locks[1], 2*c.latency)
		}
	} else if beats[1].P50 < beats[0].P50+added {
		t.Errorf("heartbeats' p50 %v during, %v before; want at least %v more: each renews the row's lease through the slowed link", beats[1].P50, beats[0].P50, added)
	}
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
		"lock calls during", locks[1], "lock p99 before/during/after", faultkit.P99s(locks[:]),
		"heartbeats during", beats[1], "heartbeat p50 before/during/after", faultkit.P50s(beats[:]),
		"start lag p99 before/during/after", faultkit.P99s(lags[:]), "leases lost", st.LeasesLost, "claims released", st.Released)
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

func runPartition(t *testing.T, c partitionCase) {
	const (
		phase, partition = 8 * time.Second, 12 * time.Second
		keyedRate        = 60.0
		plainRate        = 40.0
		leaderTTL        = 4 * time.Second
		heartbeatEvery   = faultkit.RedisLeaseTTL / 3 // the default HeartbeatInterval
	)
	faultkit.Reserve(t, 2)
	e := faultkit.NewRedisWorld(t, faultkit.RedisWorldSpec{Nodes: 3, Plain: true})
	long := faultkit.Enqueued{}
	longBlogs := []int64{901, 902, 903, 904}
	longIDs := e.Enqueue(t, long, longBlogs, 0, 1)

	// w1's links: to PostgreSQL, or to each Redis node.
	var links []*netfault.Link
	var w1URL string
	w1Redis := e.Addrs
	// Held off, a long job's lease runs out by w1's clock: its renewals never come back. Cut off,
	// the first renewal after the cut fails to extend the lock.
	lostWithin := faultkit.RedisLeaseTTL + 500*time.Millisecond
	if c.postgres {
		links = append(links, faultkit.StartLink(t, "postgres", faultkit.PostgresAddr(t, e.Schema.URL)))
		w1URL = faultkit.Via(t, e.Schema.URL, links[0].Addr())
	} else {
		w1Redis = nil
		for i, a := range e.Addrs {
			links = append(links, faultkit.StartLink(t, fmt.Sprintf("redis node %d", i+1), a))
			w1Redis = append(w1Redis, links[i].Addr())
		}
		lostWithin = heartbeatEvery + faultkit.LockCallTimeout + 500*time.Millisecond
	}
	settings := func(s *faultkit.WorkerSettings) {
		faultkit.ShortJobs(s)
		s.LeaderTTL = leaderTTL
		// Every attempt, until the lease is lost or the test releases the job after the heal; by
		// blog, not id: the plain kind's ids are the same numbers.
		s.BlockBlogs = longBlogs
	}
	workers := e.StartWorkers(t, func(s *faultkit.WorkerSettings) {
		settings(s)
		s.RedisAddrs = w1Redis
		if w1URL != "" {
			s.DatabaseURL = w1URL
			s.LedgerURL = e.Schema.URL
		}
	}, "w1")
	faultkit.WaitFor(t, "the long jobs running on w1", 30*time.Second, func() bool { return len(e.Ledger(t)) == len(longIDs) })
	workers = append(workers, e.StartWorkers(t, settings, "w2")...)
	load := e.StartLoad(t, faultkit.LoadSpec{Keys: 100, KeyedRate: keyedRate, PlainRate: plainRate})
	w := e.RunPhases(t, workers, phase, partition, func() {
		for _, l := range links {
			var err error
			if c.postgres {
				err = l.Hold()
			} else {
				err = l.Cut()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}, func() {
		for _, l := range links {
			if err := l.Heal(); err != nil {
				t.Fatal(err)
			}
		}
		// The long jobs' second attempts still hold their rows when what w1 sent during the partition
		// arrives: its late writes must change nothing (the fence) while they run.
		time.Sleep(time.Second)
		for _, id := range longIDs {
			e.Release(t, id)
		}
	})
	keyed, plain := load.Stop(t)
	e.LogSeries(t, w)

	st, figs := e.Finish(t, workers,
		faultkit.KindJobs{Table: faultkit.KeyedKind, Keyed: true, Jobs: faultkit.MergeJobs(keyed, long)},
		faultkit.KindJobs{Table: faultkit.RedisPlainKind, LedgerKind: faultkit.RedisPlainKind, Jobs: plain})
	e.CheckConc(t, nil, 1)

	// The long jobs: stopped on w1 within their bound, run again on w2 during the partition, once.
	var stoppedWithin, rerunAfter time.Duration
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

	// What w1 started while partitioned (after a claim made just before could still start).
	var w1Keyed, w1Plain int
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
	case c.postgres && w1Plain != 0:
		t.Errorf("w1 started %d plain jobs while held off from PostgreSQL; want none: it cannot claim", w1Plain)
	case !c.postgres && w1Plain == 0:
		t.Errorf("w1 started no plain job while cut off from Redis; want it to keep working the kind that needs no lock")
	}
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
	// CheckJobs (in finish) has already proven each duplicate's lease loss; cut off from Redis,
	// w1 still writes its outcomes, so there may be none.
	if st.Failed != 0 || (!c.postgres && (figs[0].Duplicates != 0 || figs[1].Duplicates != 0 || st.Rescued != 0)) {
		t.Errorf("stats %+v, duplicates %d and %d; want no job failed, and with w1 cut off from Redis no rescue or duplicate", st, figs[0].Duplicates, figs[1].Duplicates)
	}
	recovery := faultkit.RecoveryAfter(t, e.DB, "", w.Heal, w.End, 0.9*rk.Before)
	if recovery < 0 {
		t.Errorf("the keyed kind's throughput never came back to 90%% of before (%.1f jobs/s) after the partition", rk.Before)
	}
	var w1Leases, w1Stale int64
	if w1 := workers[0].Stats(); w1 != nil {
		w1Leases, w1Stale = w1.LeasesLost, w1.StaleFinishes
	}
	if c.postgres && w1Stale < int64(len(longIDs)) {
		t.Errorf("w1's stale finishes %d; want at least its %d long jobs' retries, delivered after the heal and refused by the fence", w1Stale, len(longIDs))
	}
	if !c.postgres && st.Retried != int64(len(longIDs)) {
		t.Errorf("retried %d; want the %d long jobs', each written by w1 itself (it still reaches PostgreSQL)", st.Retried, len(longIDs))
	}
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
