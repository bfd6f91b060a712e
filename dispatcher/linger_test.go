package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/jobinfo"
)

type lingerJob struct {
	N int64 `jobpipe:"n"`
}

// lingerKind returns a registered kind of 10 workers and claims of at most 10, with every worker
// busy, and its linger wait set to wait.
func lingerKind(t *testing.T, wait time.Duration) *kindRunner {
	t.Helper()
	d := &Dispatcher{cfg: Config{Concurrency: 10, ClaimBatch: 10}, kinds: map[string]*kindRunner{}}
	if err := Register(d, jobinfo.MustDefine[lingerJob]("linger_job"), func(context.Context, *Job[lingerJob]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	k := d.kinds["linger_job"]
	k.claimLinger = wait
	for range cap(k.sem) {
		k.sem <- struct{}{}
	}
	if k.fullClaim() != 10 || k.freeWorkers() != 0 {
		t.Fatalf("full claim %d, free workers %d; want 10 and 0", k.fullClaim(), k.freeWorkers())
	}
	return k
}

// finishJobs frees n workers as a job's end does (freeSlot): its slot, then word to the producer.
func finishJobs(k *kindRunner, n int) {
	for range n {
		<-k.sem
		k.workerFreed()
	}
}

// lingerAsync runs linger on its own goroutine and returns the channel that receives its result.
func lingerAsync(ctx context.Context, k *kindRunner) <-chan int {
	got := make(chan int, 1)
	go func() {
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		got <- k.linger(ctx, timer)
	}()
	return got
}

// checkLingerReturns waits for linger's result on got and checks it is want free workers; stuck
// names the state in which a linger still waiting after 10 s is wrong.
func checkLingerReturns(t *testing.T, got <-chan int, want int, stuck string) {
	t.Helper()
	select {
	case free := <-got:
		if free != want {
			t.Fatalf("linger returned %d free workers; want %d", free, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("linger still waiting %s", stuck)
	}
}

// TestLingerReturnsWhenAFullClaimIsFree checks the wake path: each freed worker wakes the wait, which
// returns as soon as a full claim's worth of workers is free, long before its bound.
func TestLingerReturnsWhenAFullClaimIsFree(t *testing.T) {
	k := lingerKind(t, time.Hour)
	got := lingerAsync(t.Context(), k)
	finishJobs(k, 4)
	select {
	case free := <-got:
		t.Fatalf("linger returned %d free workers with 4 of a full claim's 10 free; want it to wait", free)
	case <-time.After(50 * time.Millisecond):
	}
	finishJobs(k, 6)
	checkLingerReturns(t, got, 10, "with all 10 workers free")
}

// TestLingerReturnsAtOnceWithAFullClaimFree checks that a full claim's worth of free workers is not
// waited on at all.
func TestLingerReturnsAtOnceWithAFullClaimFree(t *testing.T) {
	k := lingerKind(t, time.Hour)
	finishJobs(k, 10)
	for len(k.wake) > 0 {
		<-k.wake // no wake pending: linger must see the free workers without one
	}
	checkLingerReturns(t, lingerAsync(t.Context(), k), 10, "with a full claim's worth of workers free")
}

// TestLingerEndsAtItsBound checks that the wait ends at its bound with the workers free by then.
func TestLingerEndsAtItsBound(t *testing.T) {
	const wait = 30 * time.Millisecond
	k := lingerKind(t, wait)
	finishJobs(k, 3)
	start := time.Now()
	free := k.linger(t.Context(), time.NewTimer(time.Hour))
	if took := time.Since(start); free != 3 || took < wait {
		t.Fatalf("linger returned %d free workers after %v; want 3 after at least %v", free, took, wait)
	}
}

// TestLingerEndsWithItsContext checks that stopping the dispatcher ends the wait.
func TestLingerEndsWithItsContext(t *testing.T) {
	k := lingerKind(t, time.Hour)
	finishJobs(k, 2)
	ctx, cancel := context.WithCancel(t.Context())
	got := lingerAsync(ctx, k)
	cancel()
	checkLingerReturns(t, got, 2, "after its context ended")
}

// TestNextClaimIsNeverNegative checks the claim size after a wait during which the finisher fell
// behind: handlers that returned meanwhile put more than maxFinishing outcomes in its queue, so the
// kind has fewer than no workers to claim for. It must claim nothing, not send a negative LIMIT
// (which PostgreSQL refuses, failing the claim and pausing the kind).
func TestNextClaimIsNeverNegative(t *testing.T) {
	const wait = 500 * time.Millisecond
	k := lingerKind(t, wait)
	k.claimWasFull = true // a backlog: the claim waits for a full batch of free workers
	finishJobs(k, 3)
	backlog := int64(k.maxFinishing() + 5)
	go func() {
		time.Sleep(wait / 50) // into the wait: 3 of 10 workers free
		k.finishing.Add(backlog)
		finishJobs(k, 2) // and wake it: 5 free, but more than maxFinishing outcomes waiting
	}()
	if n := k.nextClaim(t.Context(), time.NewTimer(time.Hour)); n != 0 {
		t.Fatalf("nextClaim = %d with %d outcomes waiting (at most %d); want 0", n, k.finishing.Load(), k.maxFinishing())
	}
	k.finishing.Add(-backlog)
	if n := k.nextClaim(t.Context(), time.NewTimer(time.Hour)); n != 5 {
		t.Fatalf("nextClaim = %d with the outcomes written and 5 workers free; want 5 after the wait", n)
	}
}
