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

// A worker process is SIGKILLed while its job runs, leaving its row leased and its execution lock in
// Redis. Another worker process retries the job once the lease has expired, and not before: one
// completion, both attempts counted, a greater fencing token, and the orphaned lock (which expires
// with its TTL) does not hold the retry back. The next job of the key waits for the retried one.
func TestWorkerKilledMidJobIsRetriedOnce(t *testing.T) {
	t.Parallel()
	const (
		leaseTTL   = 3 * time.Second // short, yet a heartbeat (every 1 s) late by 2 s on a loaded machine is needed to lose it
		rescue     = 200 * time.Millisecond
		leaderTTL  = 3 * time.Second // the victim leads maintenance: its leadership lapses about when its lease does
		retryDelay = 200 * time.Millisecond
		blog       = 7
		slack      = 3 * time.Second // for "promptly" on a loaded machine; correctness bounds are exact
	)
	ctx := context.Background()
	faultkit.Reserve(t, 1) // the victim, then the rescuer: one process at a time
	r := testenv.NewRedis(t)
	e := faultkit.NewWorld(t, retryDelay, r.Addrs, r.Clients, r.Prefix)
	first, err := dispatcher.Enqueue(ctx, e.DB, e.Kind, faultkit.KeyedJob{BlogID: blog, Seq: 0})
	if err != nil {
		t.Fatal(err)
	}
	second, err := dispatcher.Enqueue(ctx, e.DB, e.Kind, faultkit.KeyedJob{BlogID: blog, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	settings := func(node string) faultkit.WorkerSettings {
		s := e.WorkerSettings(node)
		s.BlockIDs, s.BlockUpToAttempt = []int64{first.ID}, 1 // the first job's first attempt never ends
		s.LeaseTTL, s.RescueInterval, s.LeaderTTL, s.PollInterval = leaseTTL, rescue, leaderTTL, 200*time.Millisecond
		s.RetryDelay = retryDelay
		return s
	}

	victim := faultkit.StartWorker(t, settings("victim"))
	faultkit.WaitFor(t, "the first job to start in the victim", 60*time.Second, func() bool { return len(e.CallsOf(t, first.ID)) == 1 })
	time.Sleep(leaseTTL / 2) // heartbeats renew the lease meanwhile: the retry must wait for the renewed one
	victim.Kill(t)
	killedAt := e.Now(t)
	time.Sleep(200 * time.Millisecond) // a statement the victim sent just before it died has landed by now

	before := e.Row(t, first.ID)
	if before.LeaseExpiresAt == nil || before.LeaseOwner == nil || *before.LeaseOwner != "victim" || before.Attempts != 1 || before.Processed {
		t.Fatalf("the first job after the kill: %+v; want leased by the victim, attempt 1", before)
	}
	leaseEnd := *before.LeaseExpiresAt
	if n := len(e.CallsOf(t, second.ID)); n != 0 {
		t.Fatalf("the second job of the key ran (%d times) while the first was running", n)
	}
	var leaderEnd time.Time
	var leader string
	if err := e.DB.QueryRow(ctx, `SELECT holder, expires_at FROM jobpipe_leaders WHERE name LIKE 'rescue:%'`).Scan(&leader, &leaderEnd); err != nil || leader != "victim" {
		t.Fatalf("leader lease: %q, %v; want the victim's", leader, err)
	}
	// The victim's execution lock is orphaned in Redis (on a quorum of nodes at least), with a TTL no
	// longer than the lease's.
	lockKey := e.ExecLockKey(blog, 0)
	var lockTTL time.Duration
	holding := 0
	for i, c := range r.Clients {
		v, err := c.Get(ctx, lockKey).Result()
		if err != nil || !strings.HasPrefix(v, "victim:") {
			t.Logf("node %s: execution lock %s = %q, %v", r.Addrs[i], lockKey, v, err)
			continue
		}
		holding++
		ttl, err := c.PTTL(ctx, lockKey).Result()
		if err != nil || ttl <= 0 || ttl > leaseTTL {
			t.Fatalf("node %s: the orphaned execution lock's TTL is %v (%v); want in (0, %v]", r.Addrs[i], ttl, err, leaseTTL)
		}
		lockTTL = max(lockTTL, ttl)
	}
	if holding < len(r.Clients)/2+1 {
		t.Fatalf("%d of %d nodes hold the victim's execution lock %s: not a quorum, the scenario did not happen", holding, len(r.Clients), lockKey)
	}
	lockEnd := e.Now(t).Add(lockTTL)

	rescuer := faultkit.StartWorker(t, settings("rescuer"))
	faultkit.WaitReady(t, 60*time.Second, rescuer)
	rescuerReady := e.Now(t)
	faultkit.WaitFor(t, "both jobs processed", 60*time.Second, func() bool {
		return e.Count(t, "processed_at IS NOT NULL") == 2
	})

	// The first job: two attempts, the killed one never ended, the retry completed, and once only.
	calls := e.CallsOf(t, first.ID)
	if len(calls) != 2 {
		t.Fatalf("the first job's handler ran %d times, want 2: %+v", len(calls), calls)
	}
	killed, retried := calls[0], calls[1]
	if killed.Node != "victim" || killed.Pid != victim.Pid || killed.Attempt != 1 || killed.EndedAt != nil {
		t.Errorf("first attempt %+v; want attempt 1 in the victim, never ended", killed)
	}
	if retried.Node != "rescuer" || retried.Pid != rescuer.Pid || retried.Attempt != 2 || retried.EndedAt == nil ||
		retried.Outcome == nil || *retried.Outcome != "ok" {
		t.Errorf("second attempt %+v; want attempt 2 in the rescuer, ended ok", retried)
	}
	if killed.Token != before.Token || retried.Token <= killed.Token {
		t.Errorf("tokens: killed attempt %d (row had %d), retry %d; want the retry's greater", killed.Token, before.Token, retried.Token)
	}
	after := e.Row(t, first.ID)
	if !after.Processed || after.Failed || after.Attempts != 2 || after.Token != retried.Token || after.LeaseExpiresAt != nil ||
		after.LastError == nil || !strings.HasPrefix(*after.LastError, "lease expired: victim stopped renewing it") {
		t.Errorf("the first job's row: %+v; want processed on attempt 2 with token %d, the rescue's reason kept", after, retried.Token)
	}
	// Not before the victim's lease expired (the database's clock throughout).
	if retried.StartedAt.Before(leaseEnd) || after.StartedAt == nil || after.StartedAt.Before(leaseEnd) {
		t.Errorf("the retry started at %v (claimed at %v), before the victim's lease ended at %v", retried.StartedAt, after.StartedAt, leaseEnd)
	}
	if earliest := killed.StartedAt.Add(leaseTTL - 50*time.Millisecond); retried.StartedAt.Before(earliest) {
		t.Errorf("the retry started %v after the first attempt, less than the lease TTL %v", retried.StartedAt.Sub(killed.StartedAt), leaseTTL)
	}
	// Promptly after the last of: the lease, the orphaned lock, the victim's leadership, the rescuer's
	// start. A lock that outlived its TTL would hold the retry back past this bound.
	latest := leaseEnd
	for _, x := range []time.Time{lockEnd, leaderEnd, rescuerReady} {
		if x.After(latest) {
			latest = x
		}
	}
	if bound := latest.Add(rescue + retryDelay + slack); retried.StartedAt.After(bound) {
		t.Errorf("the retry started at %v, %v after the lease, lock, leadership and rescuer were all ready (%v)",
			retried.StartedAt, retried.StartedAt.Sub(latest), latest)
	}

	// The next job of the key waited for the retried one, and ran once.
	next := e.CallsOf(t, second.ID)
	if len(next) != 1 || next[0].Attempt != 1 || next[0].EndedAt == nil || !next[0].StartedAt.After(*retried.EndedAt) {
		t.Errorf("the second job's handler calls %+v; want one, after the retried first job ended at %v", next, retried.EndedAt)
	}
	if st := e.Row(t, second.ID); !st.Processed || st.Attempts != 1 {
		t.Errorf("the second job's row: %+v; want processed on attempt 1", st)
	}

	faultkit.Terminate(t, rescuer)
	e.CheckQuiet(t)
	st := rescuer.Stats()
	if st == nil || st.Rescued != 1 || st.Processed != 2 || st.LeasesLost != 0 || st.StaleFinishes != 0 {
		t.Errorf("rescuer stats %+v; want 1 rescued, 2 processed, no lost lease or stale finish", st)
	}
	t.Logf("killed %v after the first attempt started; lease ended %v after the kill (lock TTL left %v); retry started %v after the kill, %v after the lease ended, %v after the rescuer was ready; rescuer stats %+v",
		killedAt.Sub(killed.StartedAt).Round(time.Millisecond), leaseEnd.Sub(killedAt).Round(time.Millisecond), lockTTL,
		retried.StartedAt.Sub(killedAt).Round(time.Millisecond), retried.StartedAt.Sub(leaseEnd).Round(time.Millisecond),
		retried.StartedAt.Sub(rescuerReady).Round(time.Millisecond), st)
}

// A worker process is SIGKILLed in the middle of a key run: the key's first two jobs are processed,
// the third runs, the last two wait. The rescue takes back exactly the running job; the waiting ones
// were never claimed (no attempt, no lease) and run after its retry, in order, in another process.
func TestWorkerKilledMidKeyRunLeavesOnlyItsJob(t *testing.T) {
	t.Parallel()
	const (
		leaseTTL = 3 * time.Second
		blog     = 9
	)
	ctx := context.Background()
	faultkit.Reserve(t, 1) // the victim, then the rescuer: one process at a time
	r := testenv.NewRedis(t)
	e := faultkit.NewWorld(t, 200*time.Millisecond, r.Addrs, r.Clients, r.Prefix)
	var ids []int64
	for seq := range 5 {
		j, err := dispatcher.Enqueue(ctx, e.DB, e.Kind, faultkit.KeyedJob{BlogID: blog, Seq: int64(seq)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	settings := func(node string) faultkit.WorkerSettings {
		s := e.WorkerSettings(node)
		s.BlockIDs, s.BlockUpToAttempt = ids[2:3], 1 // the third job's first attempt never ends
		s.LeaseTTL, s.RescueInterval, s.LeaderTTL, s.PollInterval = leaseTTL, 200*time.Millisecond, leaseTTL, 200*time.Millisecond
		return s
	}
	victim := faultkit.StartWorker(t, settings("victim"))
	faultkit.WaitFor(t, "the third job to start in the victim", 60*time.Second, func() bool { return len(e.CallsOf(t, ids[2])) == 1 })
	victim.Kill(t)
	time.Sleep(200 * time.Millisecond) // a statement the victim sent just before it died has landed by now

	for i, id := range ids {
		row, calls := e.Row(t, id), e.CallsOf(t, id)
		switch {
		case i < 2:
			if !row.Processed || row.Attempts != 1 || len(calls) != 1 || calls[0].Node != "victim" {
				t.Errorf("job %d before the kill: %+v, calls %+v; want processed by the victim on attempt 1", i, row, calls)
			}
		case i == 2:
			if row.Processed || row.Attempts != 1 || row.LeaseOwner == nil || *row.LeaseOwner != "victim" || row.LockSlot == nil || *row.LockSlot != 0 {
				t.Errorf("the running job after the kill: %+v; want leased by the victim on slot 0, attempt 1", row)
			}
		default:
			if row.Processed || row.Attempts != 0 || row.LeaseExpiresAt != nil || row.StartedAt != nil || len(calls) != 0 {
				t.Errorf("job %d after the kill: %+v, calls %+v; want waiting, never claimed", i, row, calls)
			}
		}
	}

	rescuer := faultkit.StartWorker(t, settings("rescuer"))
	faultkit.WaitFor(t, "all five processed", 60*time.Second, func() bool { return e.Count(t, "processed_at IS NOT NULL") == 5 })
	var prevEnd *time.Time
	for i, id := range ids {
		row, calls := e.Row(t, id), e.CallsOf(t, id)
		wantAttempts := 1
		if i == 2 {
			wantAttempts = 2
		}
		if row.Attempts != wantAttempts || len(calls) != wantAttempts {
			t.Errorf("job %d: %d attempts, %d handler calls; want %d", i, row.Attempts, len(calls), wantAttempts)
			continue
		}
		last := calls[len(calls)-1]
		if prevEnd != nil && !last.StartedAt.After(*prevEnd) {
			t.Errorf("job %d started at %v, before the key's previous job ended at %v", i, last.StartedAt, *prevEnd)
		}
		prevEnd = last.EndedAt
	}
	faultkit.Terminate(t, rescuer)
	e.CheckQuiet(t)
	if st := rescuer.Stats(); st == nil || st.Rescued != 1 || st.Processed != 3 || st.StaleFinishes != 0 {
		t.Errorf("rescuer stats %+v; want 1 rescued and 3 processed", st)
	}
}
