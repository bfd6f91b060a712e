package dispatcher

import (
	"context"
	"testing"
	"time"
)

// A kind without a backlog waits gatherFor before it claims, and drops the wake-ups that came
// meanwhile (the claim will see their jobs); one with a backlog does not wait.
func TestGatherWaitsAndDropsTheWakeUpsOfItsWait(t *testing.T) {
	p := lingerKind(t, 0)
	finishJobs(p, 10)
	p.gatherFor = 100 * time.Millisecond
	go func() {
		time.Sleep(20 * time.Millisecond)
		p.signal()
	}()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	start := time.Now()
	if free := p.nextClaim(context.Background(), timer); free != 10 {
		t.Fatalf("nextClaim = %d, want 10", free)
	}
	if took := time.Since(start); took < p.gatherFor {
		t.Errorf("nextClaim returned after %v; want a wait of %v first", took, p.gatherFor)
	}
	select {
	case <-p.wake:
		t.Error("the wake-up sent during the wait is still pending: it would cost a claim that finds nothing")
	default:
	}

	p.claimWasFull = true
	start = time.Now()
	if free := p.nextClaim(context.Background(), timer); free != 10 {
		t.Fatalf("nextClaim with a backlog = %d, want 10", free)
	}
	if took := time.Since(start); took >= p.gatherFor {
		t.Errorf("nextClaim with a backlog and every worker free took %v; want no wait", took)
	}
}

// A small batch of outcomes waits for those that come within the wait, and no longer.
func TestGatherMoreTakesWhatComesWithinTheWait(t *testing.T) {
	reqs := make(chan finishReq, 10)
	go func() {
		for i := range 3 {
			time.Sleep(10 * time.Millisecond)
			reqs <- finishReq{id: int64(i + 2)}
		}
	}()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	start := time.Now()
	batch := gatherMore([]finishReq{{id: 1}}, reqs, timer, 200*time.Millisecond, 10)
	if len(batch) != 4 || batch[3].id != 4 {
		t.Fatalf("gathered %v; want the 4 outcomes", batch)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("returned after %v; want the whole wait", took)
	}
	// It returns as soon as the batch holds upTo, with the rest left waiting.
	for i := range 3 {
		reqs <- finishReq{id: int64(10 + i)}
	}
	start = time.Now()
	if batch := gatherMore([]finishReq{{id: 9}}, reqs, timer, time.Hour, 3); len(batch) != 3 || len(reqs) != 1 {
		t.Errorf("gathered %d outcomes, %d left; want 3 and 1", len(batch), len(reqs))
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a full batch returned after %v; want at once", took)
	}
	<-reqs
	close(reqs)
	start = time.Now()
	if batch := gatherMore([]finishReq{{id: 5}}, reqs, timer, time.Hour, 10); len(batch) != 1 {
		t.Errorf("after close: gathered %d outcomes, want 1", len(batch))
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("after close: returned after %v; want at once", took)
	}
}
