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
func lingerKind(t *testing.T, wait time.Duration) *producer {
	t.Helper()
	d := &Dispatcher{shared: &shared{cfg: Config{Concurrency: 10, ClaimBatch: 10}}, kinds: map[string]*kindRunner{}}
	if err := Register(d, jobinfo.MustDefine[lingerJob]("linger_job"), func(context.Context, *Job[lingerJob]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	p := d.kinds["linger_job"].prod
	p.lingerFor = wait
	for range p.capacity.size() {
		p.capacity.take()
	}
	if p.fullClaim() != 10 || p.capacity.free() != 0 {
		t.Fatalf("full claim %d, free workers %d; want 10 and 0", p.fullClaim(), p.capacity.free())
	}
	return p
}

// finishJobs frees n workers as a job's end does (releasePlace): its slot, then word to the producer.
func finishJobs(p *producer, n int) {
	for range n {
		<-p.capacity.running
		p.capacity.notify()
	}
}

// lingerAsync runs linger on its own goroutine and returns the channel that receives its result.
func lingerAsync(ctx context.Context, p *producer) <-chan int {
	got := make(chan int, 1)
	go func() {
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		got <- p.linger(ctx, timer)
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
	p := lingerKind(t, time.Hour)
	got := lingerAsync(t.Context(), p)
	finishJobs(p, 4)
	select {
	case free := <-got:
		t.Fatalf("linger returned %d free workers with 4 of a full claim's 10 free; want it to wait", free)
	case <-time.After(50 * time.Millisecond):
	}
	finishJobs(p, 6)
	checkLingerReturns(t, got, 10, "with all 10 workers free")
}

// TestLingerReturnsAtOnceWithAFullClaimFree checks that a full claim's worth of free workers is not
// waited on at all.
func TestLingerReturnsAtOnceWithAFullClaimFree(t *testing.T) {
	p := lingerKind(t, time.Hour)
	finishJobs(p, 10)
	for len(p.wake) > 0 {
		<-p.wake // no wake pending: linger must see the free workers without one
	}
	checkLingerReturns(t, lingerAsync(t.Context(), p), 10, "with a full claim's worth of workers free")
}

// TestLingerEndsAtItsBound checks that the wait ends at its bound with the workers free by then.
func TestLingerEndsAtItsBound(t *testing.T) {
	const wait = 30 * time.Millisecond
	p := lingerKind(t, wait)
	finishJobs(p, 3)
	start := time.Now()
	free := p.linger(t.Context(), time.NewTimer(time.Hour))
	if took := time.Since(start); free != 3 || took < wait {
		t.Fatalf("linger returned %d free workers after %v; want 3 after at least %v", free, took, wait)
	}
}

// TestLingerEndsWithItsContext checks that stopping the dispatcher ends the wait.
func TestLingerEndsWithItsContext(t *testing.T) {
	p := lingerKind(t, time.Hour)
	finishJobs(p, 2)
	ctx, cancel := context.WithCancel(t.Context())
	got := lingerAsync(ctx, p)
	cancel()
	checkLingerReturns(t, got, 2, "after its context ended")
}

// TestNextClaimIsNeverNegative checks the claim size after a wait during which the finisher fell
// behind: handlers that returned meanwhile put more than maxFinishing outcomes in its queue, so the
// kind has fewer than no workers to claim for. It must claim nothing, not send a negative LIMIT
// (which PostgreSQL refuses, failing the claim and pausing the kind).
func TestNextClaimIsNeverNegative(t *testing.T) {
	const wait = 500 * time.Millisecond
	p := lingerKind(t, wait)
	p.claimWasFull = true // a backlog: the claim waits for a full batch of free workers
	finishJobs(p, 3)
	backlog := int64(p.capacity.maxFinishing() + 5)
	go func() {
		time.Sleep(wait / 50) // into the wait: 3 of 10 workers free
		p.capacity.finishing.Add(backlog)
		finishJobs(p, 2) // and wake it: 5 free, but more than maxFinishing outcomes waiting
	}()
	if n := p.nextClaim(t.Context(), time.NewTimer(time.Hour)); n != 0 {
		t.Fatalf("nextClaim = %d with %d outcomes waiting (at most %d); want 0", n, p.capacity.finishing.Load(), p.capacity.maxFinishing())
	}
	p.capacity.finishing.Add(-backlog)
	if n := p.nextClaim(t.Context(), time.NewTimer(time.Hour)); n != 5 {
		t.Fatalf("nextClaim = %d with the outcomes written and 5 workers free; want 5 after the wait", n)
	}
}

// A kind's claims take ClaimBatch jobs at most; by default a quarter of its concurrency, at least
// DefaultClaimBatch, so that a kind with many workers fills them in few claims.
func TestClaimBatchDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ concurrency, kindConcurrency, claimBatch, want int }{
		{concurrency: 10, want: DefaultClaimBatch},
		{concurrency: 1000, want: 250},
		{concurrency: 100, kindConcurrency: 2000, want: 500},
		{concurrency: 1000, claimBatch: 7, want: 7},
	} {
		d := &Dispatcher{shared: &shared{cfg: Config{Concurrency: tc.concurrency, ClaimBatch: tc.claimBatch}}, kinds: map[string]*kindRunner{}}
		var opts []jobinfo.Option
		if tc.kindConcurrency > 0 {
			opts = append(opts, jobinfo.Concurrency(tc.kindConcurrency))
		}
		kind := jobinfo.MustDefine[lingerJob]("claim_batch_job", opts...)
		if err := Register(d, kind, func(context.Context, *Job[lingerJob]) error { return nil }); err != nil {
			t.Fatal(err)
		}
		p := d.kinds["claim_batch_job"].prod
		if p.batch != tc.want || p.fullClaim() != min(tc.want, p.capacity.size()) {
			t.Errorf("%+v: claims of %d (full claim %d), want %d", tc, p.batch, p.fullClaim(), tc.want)
		}
	}
}
