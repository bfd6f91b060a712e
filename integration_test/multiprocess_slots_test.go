package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
	"github.com/jobpipe/jobpipe/internal/testenv"
)

// Four worker processes work 50 keys x 12 jobs of a kind whose per-key limit is 3 (jobinfo.KeyLimit),
// against 3 Redis lock nodes. The handlers count themselves per key in mp_conc as they start and end
// (one row lock per key, so the count is exact across processes). It must show: per key never more
// than 3 handlers at once, never two in one slot, and 3 reached; the slots used are 0 to 2; every job
// ran exactly once; a key's jobs were claimed in their enqueue order (orderCheckSQL).
//
// "3 reached" is required of every key, and made independent of the machine's speed: the first 3
// jobs of each key block until the test has seen all 150 of them running at once (the four processes
// have 200 places, so free places would take a 4th job of a key if the dispatchers allowed it). With
// short jobs alone it would not be: by Little's law the 150 places are all busy only when a job lasts
// longer than the dispatchers take to start 150 jobs, about half a second on a loaded 2-CPU machine
// under -race, so jobs of 20 to 60 ms reach 3 on most keys only by luck of timing. The 450 jobs that
// follow are short (40 to 60 ms) and churn through the slots, which is where a 4th job would slip in.
func TestSlotsFourProcessesFiftyKeysLimitThree(t *testing.T) {
	t.Parallel()
	const keys, perKey, procs, limit = 50, 12, 4, 3
	const total = keys * perKey
	faultkit.Reserve(t, procs)
	addrs, clients := faultkit.NodeAddrs(testenv.StartRedisNodes(t, 3))
	e := faultkit.NewWorld(t, faultkit.DefaultRetryDelay, addrs, clients, "jpmp:")
	e.InstallOrderCheck(t)
	blogs := make([]int64, keys)
	for i := range blogs {
		blogs[i] = int64(i)
	}
	enqueued := faultkit.Enqueued{}
	// Seq-major, so that each key's jobs are interleaved with the others' in id order.
	firstWave := e.Enqueue(t, enqueued, blogs, 0, limit)
	e.Enqueue(t, enqueued, blogs, limit, perKey-limit)

	var workers []*faultkit.Worker
	for i := range procs {
		s := e.WorkerSettings(fmt.Sprintf("w%d", i+1))
		s.KeyLimit, s.BlockIDs = limit, firstWave
		s.SleepMin, s.SleepMax = 40*time.Millisecond, 60*time.Millisecond
		s.LeaseTTL = 10 * time.Second // no lease may be lost here: a lost one fails the test
		s.PollInterval = 500 * time.Millisecond
		s.Concurrency = 50
		workers = append(workers, faultkit.StartWorker(t, s))
	}
	faultkit.WaitReady(t, 60*time.Second, workers...)
	began := time.Now()

	// The first wave: every key at 3, and no 4th job anywhere although places are free.
	faultkit.WaitFor(t, "3 jobs of every key running", 60*time.Second, func() bool { return e.Count(t, "lease_expires_at IS NOT NULL") >= keys*limit })
	filled := time.Since(began)
	// Each handler records its call through a small pool of its worker's, which a busy machine can
	// leave a second or more behind the claims; the claim passes that follow must add no call.
	faultkit.WaitFor(t, "every running job's handler called", 30*time.Second, func() bool { return len(e.Ledger(t)) >= keys*limit })
	time.Sleep(time.Second) // a few claim passes of each worker
	if n := len(e.Ledger(t)); n != keys*limit {
		t.Errorf("%d handler calls while every key ran %d blocked jobs, want %d", n, limit, keys*limit)
	}
	conc := e.Conc(t)
	for _, b := range blogs {
		if c := conc[b]; c.Running != limit || c.MaxSeen != limit || len(c.Slots) != limit {
			t.Errorf("blog %d with its first %d jobs blocked: %+v; want %d running in slots 0 to %d", b, limit, c, limit, limit-1)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	firstWaveAt := len(e.Ledger(t))

	e.ReleaseAll(t, firstWave)
	faultkit.WaitFor(t, "every job processed", 90*time.Second, func() bool {
		if n := e.Count(t, "failed_at IS NOT NULL"); n > 0 {
			t.Fatalf("%d jobs failed", n)
		}
		return e.Count(t, "processed_at IS NOT NULL") == total
	})
	elapsed := time.Since(began)

	e.CheckDoneOnce(t, enqueued, nil, limit)
	e.CheckConc(t, nil, limit)
	e.CheckOrder(t)
	// The count each start saw; how often the short jobs found their key at 3 is reported.
	ledger := e.Ledger(t)
	atLimit := 0
	perWorker := map[string]int{}
	for i, m := range ledger {
		if m.Running > limit {
			t.Errorf("job %d started with %d handlers of blog %d running, itself included; the limit is %d", m.JobID, m.Running, m.BlogID, limit)
		}
		if i >= firstWaveAt && m.Running == limit {
			atLimit++
		}
		perWorker[m.Node]++
	}
	if len(perWorker) < 2 {
		t.Errorf("only %d process(es) ran jobs (%v): the test needs the work spread over several", len(perWorker), perWorker)
	}

	took := faultkit.Terminate(t, workers...)
	e.CheckQuiet(t)
	sum := faultkit.SumStats(t, workers)
	faultkit.CheckCleanStats(t, sum, total)
	t.Logf("%d keys at %d in %v; %d jobs (limit %d) in %v (%.0f jobs/s); %d of the %d short jobs started with their key at its limit; per worker %v; %s; stopped in %v",
		keys, limit, filled.Round(time.Millisecond), total, limit, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(),
		atLimit, total-keys*limit, perWorker, faultkit.StatsSummary(sum), took)
}

// Keys at their limit of 3, every job blocking, and then the Redis lock node(s) restart empty: Redis
// forgets every execution lock, so that anyone can now take any slot there. More jobs are enqueued.
// No key may run a 4th job: the database shows the slots busy (the head queries leave a key at its
// limit alone, and the running-slots index refuses a second claim of a slot). Released one per key,
// each key starts exactly one job, in the slot that was freed. Then everything completes, exactly
// once, never more than 3 of a key at once.
func TestSlotsRedisRestartedEmptyKeepsLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name             string
		nodes, restarted int
	}{
		{"1 node restarted", 1, 1},
		{"2 of 3 nodes restarted", 3, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each reserves its own dispatchers
			runSlotsRedisRestart(t, c.nodes, c.restarted)
		})
	}
}

func runSlotsRedisRestart(t *testing.T, nodeCount, restarted int) {
	const (
		keys, limit, first, more = 6, 3, 5, 2
		// Heartbeats (every LeaseTTL/3) of the jobs started before the restart would find their
		// locks gone and stop those jobs, as they should; the scenario plays out well before the first.
		leaseTTL = 90 * time.Second
		poll     = 200 * time.Millisecond
	)
	ctx := context.Background()
	faultkit.Reserve(t, 2)
	nodes := testenv.StartRedisNodes(t, nodeCount)
	addrs, clients := faultkit.NodeAddrs(nodes)
	e := faultkit.NewWorld(t, faultkit.DefaultRetryDelay, addrs, clients, "jpmp:")
	e.InstallOrderCheck(t)
	blogs := []int64{1, 2, 3, 4, 5, 6}
	enqueued := faultkit.Enqueued{}
	e.Enqueue(t, enqueued, blogs, 0, first)

	var workers []*faultkit.Worker
	for _, name := range []string{"wa", "wb"} {
		s := e.WorkerSettings(name)
		s.KeyLimit, s.BlockBlogs = limit, blogs // every job blocks until released through mp_release
		s.LeaseTTL, s.PollInterval, s.Concurrency = leaseTTL, poll, 20
		s.RescueInterval = time.Second // the default, LeaseTTL/3, is refused as longer than the default LeaderTTL
		workers = append(workers, faultkit.StartWorker(t, s))
	}
	faultkit.WaitReady(t, 60*time.Second, workers...)
	running := map[int64][]faultkit.Call{}
	for _, b := range blogs {
		running[b] = e.WaitRunning(t, b, limit, 30*time.Second)
		slots := map[int]bool{}
		for _, m := range running[b] {
			if m.Slot < 0 || m.Slot >= limit || slots[m.Slot] {
				t.Fatalf("blog %d runs %v: want slots 0 to %d, each once", b, running[b], limit-1)
			}
			slots[m.Slot] = true
		}
	}
	// Each slot's execution lock is held on a quorum of nodes.
	quorum := nodeCount/2 + 1
	for _, b := range blogs {
		for _, m := range running[b] {
			key, holding := e.ExecLockKey(b, m.Slot), 0
			for _, c := range clients {
				if n, err := c.Exists(ctx, key).Result(); err == nil && n == 1 {
					holding++
				}
			}
			if holding < quorum {
				t.Fatalf("%d of %d nodes hold %s: not a quorum, the scenario did not happen", holding, nodeCount, key)
			}
		}
	}

	for _, n := range nodes[:restarted] {
		n.Restart(t)
	}
	restartedAt := time.Now()
	busy := running[blogs[0]][0]
	e.CheckFenceAfterRedisLoss(t, blogs[0], busy.Slot)

	// More jobs for every key (a wake-up for every worker), then several polls of each: nothing starts.
	e.Enqueue(t, enqueued, blogs, first, more)
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if n := len(e.Ledger(t)); n != keys*limit {
			t.Fatalf("%d handler calls after the restart, want still %d (every key at its limit): %v", n, keys*limit, e.Ledger(t)[keys*limit:])
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, b := range blogs {
		if n := e.RunningRows(t, b); n != limit {
			t.Errorf("blog %d: %d rows running after the restart, want %d", b, n, limit)
		}
	}

	// One job of each key ends: exactly one more starts, in the slot it freed, although Redis has
	// forgotten the other two.
	freed := map[int64]faultkit.Call{}
	var releasedIDs []int64
	for _, b := range blogs {
		freed[b] = running[b][1]
		releasedIDs = append(releasedIDs, running[b][1].JobID)
	}
	e.ReleaseAll(t, releasedIDs)
	for _, b := range blogs {
		var starts []faultkit.Call
		faultkit.WaitFor(t, fmt.Sprintf("the next job of blog %d to start", b), 15*time.Second, func() bool {
			starts = e.Starts(t, b)
			return len(starts) > limit
		})
		next := starts[limit]
		if next.Slot != freed[b].Slot || next.Running != limit || len(starts) != limit+1 {
			t.Errorf("blog %d: after job %d (slot %d) ended, started %v; want one job, in slot %d, with %d running", b,
				freed[b].JobID, freed[b].Slot, starts[limit:], freed[b].Slot, limit)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(e.Ledger(t)); n != keys*(limit+1) {
		t.Errorf("%d handler calls, want %d: one more per key", n, keys*(limit+1))
	}
	window := time.Since(restartedAt)

	var all []int64
	for id := range enqueued {
		all = append(all, id)
	}
	e.ReleaseAll(t, all)
	total := keys * (first + more)
	faultkit.WaitFor(t, "every job processed", 60*time.Second, func() bool { return e.Count(t, "processed_at IS NOT NULL") == total })
	e.CheckDoneOnce(t, enqueued, nil, limit)
	for b, n := range e.CheckConc(t, nil, limit) {
		if n != limit {
			t.Errorf("blog %d: at most %d jobs at once, want %d", b, n, limit)
		}
	}
	e.CheckOrder(t)

	faultkit.Terminate(t, workers...)
	e.CheckQuiet(t)
	sum := faultkit.SumStats(t, workers)
	faultkit.CheckCleanStats(t, sum, total)
	t.Logf("%d of %d nodes restarted empty with %d keys at their limit of %d; %v from the restart to the end of the checks; %s",
		restarted, nodeCount, keys, limit, window.Round(time.Millisecond), faultkit.StatsSummary(sum))
}
