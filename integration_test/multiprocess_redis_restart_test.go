package integration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
	"github.com/jobpipe/jobpipe/internal/testenv"
)

// While a long job of a key runs in one of two worker processes, two of the three Redis nodes restart
// empty: Redis forgets the job's execution lock, so that anyone can now take it on a quorum. The next
// job of the key is enqueued; neither worker may start it while the long job runs, because the database
// refuses (the running-slots index and the heads query), although both workers go on running other
// keys. Once the long job ends, exactly once, the next one runs.
func TestRedisNodeRestartedEmptyDoesNotDoubleRun(t *testing.T) {
	t.Parallel()
	const (
		blog, otherBlog = 42, 43
		// The long job's heartbeat, every LeaseTTL/3, would find its lock gone from the restarted nodes
		// and stop the job (as it should). The scenario plays out well before the first one.
		leaseTTL  = 60 * time.Second
		heartbeat = leaseTTL / 3
		poll      = 200 * time.Millisecond
	)
	ctx := context.Background()
	faultkit.Reserve(t, 2)
	nodes := testenv.StartRedisNodes(t, 3)
	addrs, clients := faultkit.NodeAddrs(nodes)
	e := faultkit.NewWorld(t, faultkit.DefaultRetryDelay, addrs, clients, "jpmp:")
	long, err := dispatcher.Enqueue(ctx, e.DB, e.Kind, faultkit.KeyedJob{BlogID: blog, Seq: 0})
	if err != nil {
		t.Fatal(err)
	}
	var workers []*faultkit.Worker
	for _, name := range []string{"wa", "wb"} {
		s := e.WorkerSettings(name)
		s.BlockIDs = []int64{long.ID} // until released through mp_release
		s.LeaseTTL, s.PollInterval, s.Concurrency = leaseTTL, poll, 4
		s.RescueInterval = time.Second // the default, LeaseTTL/3, is refused as longer than the default LeaderTTL
		workers = append(workers, faultkit.StartWorker(t, s))
	}
	faultkit.WaitReady(t, 60*time.Second, workers...)
	faultkit.WaitFor(t, "the long job to start", 30*time.Second, func() bool { return len(e.CallsOf(t, long.ID)) == 1 })
	holder := e.CallsOf(t, long.ID)[0]
	lockKey := e.ExecLockKey(blog, 0)
	holding := 0
	for i, c := range clients {
		if v, err := c.Get(ctx, lockKey).Result(); err == nil && strings.HasPrefix(v, holder.Node+":") {
			holding++
		} else {
			t.Logf("node %s: execution lock %s = %q, %v", addrs[i], lockKey, v, err)
		}
	}
	if holding < 2 {
		t.Fatalf("%d of 3 nodes hold %s's execution lock %s: not a quorum", holding, holder.Node, lockKey)
	}

	// Two nodes of three restart without their data: at most one still knows the lock.
	nodes[0].Restart(t)
	nodes[1].Restart(t)
	e.CheckFenceAfterRedisLoss(t, blog, 0)

	// The next job of the key; then jobs of other keys, one at a time, until each worker has run one.
	// Heads are claimed in id order, so a worker that claims a later job of another key has looked at
	// the next job of the busy key and passed it over.
	next, err := dispatcher.Enqueue(ctx, e.DB, e.Kind, faultkit.KeyedJob{BlogID: blog, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	ranControl := map[string]bool{}
	controls := 0
	for len(ranControl) < len(workers) {
		if controls == 50 {
			t.Fatalf("after %d jobs of other keys, only %v ran any: the test needs both workers claiming", controls, ranControl)
		}
		control, err := dispatcher.Enqueue(ctx, e.DB, e.Kind, faultkit.KeyedJob{BlogID: int64(otherBlog + controls), Seq: 0})
		if err != nil {
			t.Fatal(err)
		}
		controls++
		faultkit.WaitFor(t, "a job of another key to be processed", 30*time.Second, func() bool { return e.Row(t, control.ID).Processed })
		for _, c := range e.CallsOf(t, control.ID) {
			ranControl[c.Node] = true
		}
	}
	time.Sleep(5 * poll) // and a few more polls by each worker
	if calls := e.CallsOf(t, next.ID); len(calls) != 0 {
		t.Errorf("the next job of blog %d ran while the long job ran: %+v", blog, calls)
	}
	if st := e.Row(t, next.ID); st.StartedAt != nil || st.Attempts != 0 || st.LeaseExpiresAt != nil {
		t.Errorf("the next job of blog %d was claimed while the long job ran: %+v", blog, st)
	}
	st := e.Row(t, long.ID)
	calls := e.CallsOf(t, long.ID)
	if len(calls) != 1 || calls[0].EndedAt != nil || st.LeaseExpiresAt == nil || st.Token != holder.Token {
		t.Fatalf("the long job is no longer running as first claimed (%d handler calls %+v, row %+v); it started %v ago, its heartbeat is every %v",
			len(calls), calls, st, e.Now(t).Sub(holder.StartedAt), heartbeat)
	}
	window := e.Now(t).Sub(holder.StartedAt)

	e.Release(t, long.ID)
	faultkit.WaitFor(t, "every job processed", 30*time.Second, func() bool { return e.Count(t, "processed_at IS NOT NULL") == 2+controls })
	calls = e.CallsOf(t, long.ID)
	if len(calls) != 1 || calls[0].EndedAt == nil || calls[0].Outcome == nil || *calls[0].Outcome != "ok" {
		t.Errorf("the long job's handler calls: %+v; want one, ended ok", calls)
	}
	if st := e.Row(t, long.ID); !st.Processed || st.Attempts != 1 || st.Token != holder.Token || st.LastError != nil {
		t.Errorf("the long job's row: %+v; want processed on its first attempt, token %d", st, holder.Token)
	}
	nextCalls := e.CallsOf(t, next.ID)
	if len(nextCalls) != 1 || nextCalls[0].EndedAt == nil || calls[0].EndedAt == nil || !nextCalls[0].StartedAt.After(*calls[0].EndedAt) {
		t.Errorf("the next job's handler calls: %+v; want one, after the long job ended", nextCalls)
	}
	if st := e.Row(t, next.ID); !st.Processed || st.Attempts != 1 {
		t.Errorf("the next job's row: %+v; want processed on its first attempt", st)
	}

	faultkit.Terminate(t, workers...)
	e.CheckQuiet(t)
	var lost, stale, refused, released int64
	for _, w := range workers {
		if s := w.Stats(); s != nil {
			lost, stale, refused, released = lost+s.LeasesLost, stale+s.StaleFinishes, refused+s.ClaimsRefused, released+s.Released
		} else {
			t.Errorf("worker %s reported no stats", w.Name)
		}
	}
	if lost != 0 || stale != 0 {
		t.Errorf("workers lost %d leases and had %d stale finishes; want none", lost, stale)
	}
	t.Logf("long job held by %s for %v; meanwhile both workers ran %d jobs of other keys and passed over the next job of its key; claims refused by the database's index %d, released %d",
		holder.Node, window.Round(time.Millisecond), controls, refused, released)
}
