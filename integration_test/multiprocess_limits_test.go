package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/limits"
)

// The per-key limits changed at runtime (package limits) while two worker processes run: raised,
// lowered, set to 0 and paused. Every job blocks until the test releases it (mp_release), so that
// what runs is decided by the limits alone. Times are read on the database's clock (the ledger's
// started_at, clock_timestamp() before a change), one clock for every process.

// limitApplyBound is how long after a change of limit the tests accept before it shows: the dispatchers
// apply a change within 1 s; the rest is for scheduling noise on a loaded machine under -race.
const limitApplyBound = 1500 * time.Millisecond

// limitApplyWindow is how long a test waits after a change before it holds the dispatchers to it.
const limitApplyWindow = 1200 * time.Millisecond

// startLimitWorkers starts two workers of e with the given static key limit, blocking the jobs of
// blockBlogs, and waits until they are ready.
func startLimitWorkers(t *testing.T, e *faultkit.World, keyLimit int, blockBlogs []int64, poll time.Duration) []*faultkit.Worker {
	t.Helper()
	var workers []*faultkit.Worker
	for _, name := range []string{"wa", "wb"} {
		s := e.WorkerSettings(name)
		s.KeyLimit, s.BlockBlogs = keyLimit, blockBlogs
		s.SleepMin, s.SleepMax = 20*time.Millisecond, 30*time.Millisecond // jobs that do not block
		s.PollInterval, s.Concurrency = poll, 10
		workers = append(workers, faultkit.StartWorker(t, s))
	}
	faultkit.WaitReady(t, 60*time.Second, workers...)
	return workers
}

// finishLimitTest releases every job, waits until all are processed, runs the common checks, and
// stops the workers.
func finishLimitTest(t *testing.T, e *faultkit.World, workers []*faultkit.Worker, enqueued faultkit.Enqueued, slotsBelow map[int64]int, defaultSlots int) {
	t.Helper()
	var all []int64
	for id := range enqueued {
		all = append(all, id)
	}
	e.ReleaseAll(t, all)
	faultkit.WaitFor(t, "every job processed", 60*time.Second, func() bool { return e.Count(t, "processed_at IS NOT NULL") == len(enqueued) })
	e.CheckDoneOnce(t, enqueued, slotsBelow, defaultSlots)
	e.CheckOrder(t)
	faultkit.Terminate(t, workers...)
	e.CheckQuiet(t)
	sum := faultkit.SumStats(t, workers)
	faultkit.CheckCleanStats(t, sum, len(enqueued))
	t.Logf("workers: %s", faultkit.StatsSummary(sum))
}

// Four keys run one job each under the default limit (1); raising one key's limit to 3 (SetKey)
// starts its next two jobs within a second, and raising the kind's per-key default to 3
// (SetKeyLimit) does the same for the other keys. The workers poll only every 2 s (the default), so
// only the limits' notification can apply a change that fast.
func TestLimitRaisedAppliesWithinASecond(t *testing.T) {
	t.Parallel()
	const perKey, raised = 4, 3
	faultkit.Reserve(t, 2)
	r := testenv.NewRedis(t)
	e := faultkit.NewWorld(t, faultkit.DefaultRetryDelay, r.Addrs, r.Clients, r.Prefix)
	e.InstallOrderCheck(t)
	blogs := []int64{1, 2, 3, 4}
	enqueued := faultkit.Enqueued{}
	e.Enqueue(t, enqueued, blogs, 0, perKey)
	workers := startLimitWorkers(t, e, 0, blogs, 2*time.Second)

	for _, b := range blogs {
		e.WaitRunning(t, b, 1, 30*time.Second)
	}
	time.Sleep(time.Second) // claim passes of both workers, woken by each other's claims and by polls
	for _, b := range blogs {
		if s := e.Starts(t, b); len(s) != 1 {
			t.Fatalf("blog %d: %d jobs started under the default limit of 1: %v", b, len(s), s)
		}
	}

	// One key.
	before := e.SetKey(t, blogs[0], raised)
	got := e.WaitRunning(t, blogs[0], raised, 10*time.Second)
	keyTook := faultkit.LatestStart(got).Sub(before)
	if keyTook > limitApplyBound {
		t.Errorf("SetKey(%d, %d): the key's jobs ran %d at once %v after the change, want within 1 s (%v allowed)", blogs[0], raised, raised, keyTook, limitApplyBound)
	}
	for _, b := range blogs[1:] {
		if s := e.Starts(t, b); len(s) != 1 {
			t.Errorf("blog %d: SetKey of blog %d started %d jobs of blog %d: %v", b, blogs[0], len(s), b, s)
		}
	}

	// The kind's default, for the keys without an override.
	before = e.SetLimit(t, "SetKeyLimit", func(ctx context.Context) error {
		return limits.SetKeyLimit(ctx, e.DB, faultkit.KeyedKind, raised)
	})
	var kindTook time.Duration
	for _, b := range blogs[1:] {
		got := e.WaitRunning(t, b, raised, 10*time.Second)
		kindTook = max(kindTook, faultkit.LatestStart(got).Sub(before))
	}
	if kindTook > limitApplyBound {
		t.Errorf("SetKeyLimit(%d): the keys' jobs ran %d at once %v after the change, want within 1 s (%v allowed)", raised, raised, kindTook, limitApplyBound)
	}
	// At the new limit, each key's 4th job waits.
	time.Sleep(500 * time.Millisecond)
	for _, b := range blogs {
		if s, n := e.Starts(t, b), e.RunningRows(t, b); len(s) != raised || n != raised {
			t.Errorf("blog %d: %d started, %d rows running, want %d: %v", b, len(s), n, raised, s)
		}
	}

	finishLimitTest(t, e, workers, enqueued, nil, raised)
	for b, n := range e.CheckConc(t, nil, raised) {
		if n != raised {
			t.Errorf("blog %d: at most %d jobs at once, want %d", b, n, raised)
		}
	}
	t.Logf("raised limits applied in %v (SetKey) and %v (SetKeyLimit, slowest of 3 keys), measured from before the change to the last of the new jobs' start",
		keyTook.Round(time.Millisecond), kindTook.Round(time.Millisecond))
}

// A key runs 3 jobs (its static limit) with more waiting; its limit goes down to 1. The running jobs
// are not stopped, and no new job starts until the key runs fewer than 1: not after the first of
// them ends (although slot 0 is then free), nor after the second. After the third, exactly one
// starts, in slot 0, and from then on the key's jobs run one at a time.
func TestLimitLoweredLetsRunningJobsFinish(t *testing.T) {
	t.Parallel()
	const blog, jobs, limit, lowered = 7, 6, 3, 1
	ctx := context.Background()
	faultkit.Reserve(t, 2)
	r := testenv.NewRedis(t)
	e := faultkit.NewWorld(t, faultkit.DefaultRetryDelay, r.Addrs, r.Clients, r.Prefix)
	e.InstallOrderCheck(t)
	enqueued := faultkit.Enqueued{}
	e.Enqueue(t, enqueued, []int64{blog}, 0, jobs)
	workers := startLimitWorkers(t, e, limit, []int64{blog}, 200*time.Millisecond)

	first := e.WaitRunning(t, blog, limit, 30*time.Second)
	bySlot := map[int]faultkit.Call{}
	for _, m := range first {
		if _, dup := bySlot[m.Slot]; dup || m.Slot < 0 || m.Slot >= limit {
			t.Fatalf("blog %d runs %v: want slots 0 to %d, each once", blog, first, limit-1)
		}
		bySlot[m.Slot] = m
	}
	time.Sleep(300 * time.Millisecond)
	if s := e.Starts(t, blog); len(s) != limit {
		t.Fatalf("%d jobs started under a limit of %d: %v", len(s), limit, s)
	}

	e.SetKey(t, blog, lowered)
	time.Sleep(limitApplyWindow) // the change is in force everywhere from here on
	// The running jobs go on: the same three handler calls, their rows leased with the same tokens.
	for _, m := range first {
		calls := e.CallsOf(t, m.JobID)
		row := e.Row(t, m.JobID)
		if len(calls) != 1 || calls[0].EndedAt != nil || row.LeaseExpiresAt == nil || row.Token != m.Token {
			t.Fatalf("job %d after the limit was lowered: calls %v, row %+v; want still running as first claimed", m.JobID, calls, row)
		}
	}
	// Released one by one, slot 0 first: within the new limit's slots, a slot is free after the first.
	for i, slot := range []int{0, 1} {
		m := bySlot[slot]
		e.Release(t, m.JobID)
		faultkit.WaitFor(t, fmt.Sprintf("job %d processed", m.JobID), 10*time.Second, func() bool { return e.Row(t, m.JobID).Processed })
		e.NoNewStart(t, blog, limit, time.Second,
			fmt.Sprintf("%d of the %d jobs running when the limit went from %d to %d ended, %d still run", i+1, limit, limit, lowered, limit-1-i))
	}
	last := bySlot[2]
	e.Release(t, last.JobID)
	var starts []faultkit.Call
	faultkit.WaitFor(t, "a job to start once the key runs none", 10*time.Second, func() bool {
		starts = e.Starts(t, blog)
		return len(starts) > limit
	})
	var ended time.Time
	if err := e.DB.QueryRow(ctx, `SELECT processed_at FROM `+faultkit.KeyedKind+` WHERE id = $1`, last.JobID).Scan(&ended); err != nil {
		t.Fatal(err)
	}
	next := starts[limit]
	startedAfter := next.StartedAt.Sub(ended)
	if next.Slot != 0 || next.Running != 1 || next.Seq != limit {
		t.Errorf("the first job started under the lowered limit: %v; want seq %d, slot 0, running alone", next, limit)
	}
	time.Sleep(time.Second)
	if s := e.Starts(t, blog); len(s) != limit+1 {
		t.Errorf("%d jobs started after the key ran none, want 1 under the limit of %d: %v", len(s)-limit, lowered, s[limit:])
	}

	finishLimitTest(t, e, workers, enqueued, nil, limit)
	// From the lowering on, every job ran alone, in slot 0.
	for _, m := range e.Starts(t, blog)[limit:] {
		if m.Running != 1 || m.Slot != 0 {
			t.Errorf("job %d started under the lowered limit with %d running (itself included), in slot %d; want alone, in slot 0", m.JobID, m.Running, m.Slot)
		}
	}
	if n := e.CheckConc(t, nil, limit)[blog]; n != limit {
		t.Errorf("at most %d jobs at once, want %d before the limit was lowered", n, limit)
	}
	t.Logf("after the lowering, the next job started %v after the last of the 3 running jobs ended", startedAfter.Round(time.Millisecond))
}

// One key of five is halted: first with a limit of 0 (SetKey), then with PauseKey. Its running jobs
// finish, none of its jobs starts while it is halted, although the other keys' jobs keep running;
// restored (ClearKey, ResumeKey) it runs again, and ResumeKey restores the key's own limit.
func TestLimitZeroAndPauseHaltOneKey(t *testing.T) {
	t.Parallel()
	const halted, jobs, limit, override = 1, 9, 2, 3
	others := []int64{2, 3, 4, 5}
	faultkit.Reserve(t, 2)
	r := testenv.NewRedis(t)
	e := faultkit.NewWorld(t, faultkit.DefaultRetryDelay, r.Addrs, r.Clients, r.Prefix)
	e.InstallOrderCheck(t)
	enqueued := faultkit.Enqueued{}
	e.Enqueue(t, enqueued, []int64{halted}, 0, jobs)
	workers := startLimitWorkers(t, e, limit, []int64{halted}, 200*time.Millisecond)
	nextSeq := 0
	// watch checks for d that no job of the halted key starts beyond the first already, while jobs of
	// the other keys are enqueued every 100 ms; it returns how many of those were processed meanwhile.
	watch := func(already int, d time.Duration, why string) int {
		t.Helper()
		done := func() int { return e.Count(t, fmt.Sprintf("processed_at IS NOT NULL AND blog_id <> %d", halted)) }
		before := done()
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) {
			e.Enqueue(t, enqueued, others, nextSeq, 1)
			nextSeq++
			if s := e.Starts(t, halted); len(s) > already {
				t.Fatalf("%s: a job of the halted blog %d started: %v", why, halted, s[already:])
			}
			time.Sleep(100 * time.Millisecond)
		}
		n := done() - before
		if n < len(others) { // about 40 are enqueued a second; a halted kind would process none
			t.Errorf("%s: %d jobs of the other keys processed in %v, want them to keep running", why, n, d)
		}
		return n
	}
	// releaseRunning ends the halted key's running jobs one by one, each followed by a watch.
	releaseRunning := func(started int, why string) {
		t.Helper()
		for _, m := range e.Running(t, halted) {
			e.Release(t, m.JobID)
			faultkit.WaitFor(t, fmt.Sprintf("job %d processed", m.JobID), 10*time.Second, func() bool { return e.Row(t, m.JobID).Processed })
			watch(started, 700*time.Millisecond, why)
		}
	}

	e.WaitRunning(t, halted, limit, 30*time.Second)
	// Limit 0.
	e.SetKey(t, halted, 0)
	time.Sleep(limitApplyWindow)
	if n := len(e.Running(t, halted)); n != limit {
		t.Fatalf("%d jobs of the halted key still run after the limit went to 0, want %d: running jobs are not stopped", n, limit)
	}
	releaseRunning(limit, "limit 0")
	zeroOthers := watch(limit, 1500*time.Millisecond, "limit 0, nothing of the key running")

	// Back to the kind's limit, then an override above it.
	before := e.SetLimit(t, "ClearKey", func(ctx context.Context) error {
		return limits.ClearKey(ctx, e.DB, faultkit.KeyedKind, faultkit.KeyOf(halted))
	})
	clearTook := faultkit.LatestStart(e.WaitRunning(t, halted, limit, 10*time.Second)).Sub(before)
	before = e.SetKey(t, halted, override)
	overrideTook := faultkit.LatestStart(e.WaitRunning(t, halted, override, 10*time.Second)).Sub(before)
	started := limit + override

	// Paused.
	e.SetLimit(t, "PauseKey", func(ctx context.Context) error {
		return limits.PauseKey(ctx, e.DB, faultkit.KeyedKind, faultkit.KeyOf(halted))
	})
	time.Sleep(limitApplyWindow)
	if n := len(e.Running(t, halted)); n != override {
		t.Fatalf("%d jobs of the paused key still run, want %d: running jobs are not stopped", n, override)
	}
	releaseRunning(started, "paused")
	pausedOthers := watch(started, 1500*time.Millisecond, "paused, nothing of the key running")

	// Resumed: its override (3) is back, not the kind's limit (2).
	before = e.SetLimit(t, "ResumeKey", func(ctx context.Context) error {
		return limits.ResumeKey(ctx, e.DB, faultkit.KeyedKind, faultkit.KeyOf(halted))
	})
	resumeTook := faultkit.LatestStart(e.WaitRunning(t, halted, override, 10*time.Second)).Sub(before)
	time.Sleep(500 * time.Millisecond)
	if s := e.Starts(t, halted); len(s) != started+override {
		t.Errorf("%d jobs of the key started after ResumeKey, want %d (its limit): %v", len(s)-started, override, s[started:])
	}
	for what, took := range map[string]time.Duration{"ClearKey": clearTook, "SetKey": overrideTook, "ResumeKey": resumeTook} {
		if took > limitApplyBound {
			t.Errorf("%s: the key's jobs started %v after the change, want within 1 s (%v allowed)", what, took, limitApplyBound)
		}
	}

	finishLimitTest(t, e, workers, enqueued, map[int64]int{halted: override}, limit)
	seen := e.CheckConc(t, map[int64]int{halted: override}, limit)
	if seen[halted] != override {
		t.Errorf("the halted key ran at most %d jobs at once, want %d", seen[halted], override)
	}
	t.Logf("while the key was halted the other keys processed %d (limit 0) and %d (paused) jobs in 1.5 s; restored in %v (ClearKey), %v (SetKey %d), %v (ResumeKey)",
		zeroOthers, pausedOthers, clearTook.Round(time.Millisecond), overrideTook.Round(time.Millisecond), override, resumeTook.Round(time.Millisecond))
}
