package integration_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
	"github.com/jobpipe/jobpipe/internal/testenv"
)

// Four worker processes work 30 keys x 20 jobs of a keyed kind (limit 1 per key), with 1 and with 3
// Redis lock nodes. What the handlers recorded must show: per key never two jobs at once and the jobs
// in enqueue order; every job run exactly once; the work spread over several processes. SIGTERM then
// stops every worker cleanly, leaving no lease and no lock behind.
//
// The subtests run one after the other: each has four worker processes with about 25 PostgreSQL
// connections between them, and the test server is shared (max_connections is often 100).
func TestFourProcessesNeverTwoPerKey(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d redis nodes", n), func(t *testing.T) { runFourProcesses(t, n) })
	}
}

func runFourProcesses(t *testing.T, redisNodes int) {
	const keys, perKey, procs = 30, 20, 4
	const total = keys * perKey
	ctx := context.Background()
	faultkit.Reserve(t, procs)
	addrs, clients := faultkit.NodeAddrs(testenv.StartRedisNodes(t, redisNodes))
	e := faultkit.NewWorld(t, faultkit.DefaultRetryDelay, addrs, clients, "jpmp:")

	var workers []*faultkit.Worker
	for i := range procs {
		s := e.WorkerSettings(fmt.Sprintf("w%d", i+1))
		s.SleepMin, s.SleepMax = 0, 5*time.Millisecond
		s.LeaseTTL = 10 * time.Second // no lease may be lost here: a lost one fails the test
		s.PollInterval = 500 * time.Millisecond
		s.Concurrency = 10 // 40 slots for 30 keys: free slots would take a second job of a busy key if allowed
		workers = append(workers, faultkit.StartWorker(t, s))
	}
	// Every process is working before the first job exists, so that none gets a head start.
	faultkit.WaitReady(t, 60*time.Second, workers...)

	// Seq-major, so that each key's jobs are interleaved with the others' in id order.
	type enq struct{ blog, seq int64 }
	var jobs []faultkit.KeyedJob
	for seq := range perKey {
		for k := range keys {
			jobs = append(jobs, faultkit.KeyedJob{BlogID: int64(k), Seq: int64(seq)})
		}
	}
	began := time.Now()
	res, err := dispatcher.EnqueueMany(ctx, e.DB, e.Kind, jobs)
	if err != nil {
		t.Fatal(err)
	}
	enqueued := map[int64]enq{}
	for i, r := range res {
		if r.Err != nil || r.Duplicate {
			t.Fatalf("job %d: %+v", i, r)
		}
		enqueued[r.ID] = enq{jobs[i].BlogID, jobs[i].Seq}
	}
	if len(enqueued) != total {
		t.Fatalf("%d distinct ids for %d jobs", len(enqueued), total)
	}

	faultkit.WaitFor(t, "every job processed", 90*time.Second, func() bool {
		if n := e.Count(t, "failed_at IS NOT NULL"); n > 0 {
			t.Fatalf("%d jobs failed", n)
		}
		return e.Count(t, "processed_at IS NOT NULL") == total
	})
	elapsed := time.Since(began)

	ledger := e.Ledger(t)
	once := faultkit.NewFailureLog(t, "exactly once")
	order := faultkit.NewFailureLog(t, "order within a key")
	overlap := faultkit.NewFailureLog(t, "one job per key at a time")
	defer once.Done()
	defer order.Done()
	defer overlap.Done()
	// (iii) Every job ran exactly once: one handler call per job, which completed, on attempt 1.
	calls := map[int64]int{}
	for _, m := range ledger {
		calls[m.JobID]++
		want, ok := enqueued[m.JobID]
		switch {
		case !ok:
			once.Errorf("the ledger names job %d, which was never enqueued", m.JobID)
		case m.BlogID != want.blog || m.Seq != want.seq:
			once.Errorf("job %d ran as blog %d seq %d, enqueued as blog %d seq %d", m.JobID, m.BlogID, m.Seq, want.blog, want.seq)
		}
		if m.EndedAt == nil || m.Outcome == nil || *m.Outcome != "ok" || m.Attempt != 1 || m.Slot != 0 {
			once.Errorf("job %d: handler call %v, want attempt 1, slot 0, ended ok", m.JobID, m)
		}
	}
	for id := range enqueued {
		if calls[id] != 1 {
			once.Errorf("job %d: %d handler calls, want exactly 1", id, calls[id])
		}
	}
	if n := e.Count(t, "processed_at IS NOT NULL AND attempts_made = 1 AND failed_at IS NULL AND last_error IS NULL"); n != total {
		once.Errorf("%d of %d rows processed on their first attempt without error", n, total)
	}

	// (i) and (ii): per key, the handler intervals never overlap, and jobs started in enqueue order.
	byKey := map[int64][]faultkit.Call{}
	for _, m := range ledger {
		byKey[m.BlogID] = append(byKey[m.BlogID], m)
	}
	if len(byKey) != keys {
		once.Errorf("the ledger has %d keys, want %d", len(byKey), keys)
	}
	var minGap time.Duration = -1
	for blog, ms := range byKey {
		sort.SliceStable(ms, func(i, j int) bool { return ms[i].StartedAt.Before(ms[j].StartedAt) })
		for i, m := range ms {
			if m.Seq != int64(i) {
				var seqs []int64
				for _, x := range ms {
					seqs = append(seqs, x.Seq)
				}
				order.Errorf("blog %d: jobs started in seq order %v, want 0..%d", blog, seqs, perKey-1)
				break
			}
			if m.EndedAt != nil && m.EndedAt.Before(m.StartedAt) {
				overlap.Errorf("job %d ended before it started: %v", m.JobID, m)
			}
			if i == 0 {
				continue
			}
			prev := ms[i-1]
			if m.JobID <= prev.JobID {
				order.Errorf("blog %d: job %d started after job %d, against id order", blog, m.JobID, prev.JobID)
			}
			if prev.EndedAt == nil {
				overlap.Errorf("blog %d: %v has no recorded end, so %v may have run beside it", blog, prev, m)
				continue
			}
			if !prev.EndedAt.Before(m.StartedAt) {
				overlap.Errorf("blog %d: two jobs ran at the same time: %v and %v", blog, prev, m)
				continue
			}
			if gap := m.StartedAt.Sub(*prev.EndedAt); minGap < 0 || gap < minGap {
				minGap = gap
			}
		}
	}

	// (iv) The work was spread over the processes; otherwise the test proved little.
	perWorker := map[string]int{}
	pids := map[int]string{}
	for _, w := range workers {
		pids[w.Pid] = w.Name
	}
	for _, m := range ledger {
		if pids[m.Pid] != m.Node {
			t.Errorf("job %d ran in pid %d as %q, which is not one of the workers %v", m.JobID, m.Pid, m.Node, pids)
		}
		perWorker[m.Node]++
	}
	if len(perWorker) < 2 {
		t.Errorf("only %d process(es) ran jobs (%v): the test needs the work spread over several", len(perWorker), perWorker)
	}

	took := faultkit.Terminate(t, workers...)
	e.CheckQuiet(t)
	sum := faultkit.SumStats(t, workers)

	if sum.Processed != total || sum.Retried != 0 || sum.StaleFinishes != 0 || sum.LeasesLost != 0 || sum.Rescued != 0 || sum.ClaimsRefused != 0 {
		t.Errorf("workers' stats summed: %+v; want %d processed, no retry, stale finish, lost lease, rescue or refused claim", sum, total)
	}
	t.Logf("%d jobs over %d keys in %v (%.0f jobs/s); per worker %v; claims %d (%d released: execution lock still held); smallest gap between jobs of a key %v; stopped in %v",
		total, keys, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), perWorker, sum.Claimed, sum.Released,
		minGap, took)
}
