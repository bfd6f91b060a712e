package dispatcher

import (
	"context"
	"slices"
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
	batch := gatherMore([]finishReq{{id: 1}}, reqs, timer, gathering{wait: 200 * time.Millisecond, upTo: 10}, 0)
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
	if batch := gatherMore([]finishReq{{id: 9}}, reqs, timer, gathering{wait: time.Hour, upTo: 3}, 0); len(batch) != 3 || len(reqs) != 1 {
		t.Errorf("gathered %d outcomes, %d left; want 3 and 1", len(batch), len(reqs))
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a full batch returned after %v; want at once", took)
	}
	<-reqs
	close(reqs)
	start = time.Now()
	if batch := gatherMore([]finishReq{{id: 5}}, reqs, timer, gathering{wait: time.Hour, upTo: 10}, 0); len(batch) != 1 {
		t.Errorf("after close: gathered %d outcomes, want 1", len(batch))
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("after close: returned after %v; want at once", took)
	}
}

// A batch that continues a key run waits for the runs the lane's last statement continued, and no
// longer: not for FinishWait, and not at all for a lone run.
func TestGatherMoreWaitsOnlyForTheRunsExpected(t *testing.T) {
	run := func(id int64) finishReq { return finishReq{id: id, next: make(chan *claimed, 1)} }
	ids := func(batch []finishReq) (ids []int64) {
		for _, r := range batch {
			ids = append(ids, r.id)
		}
		return ids
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	// Bounds no scheduling delay reaches, but for the one a case measures.
	g := gathering{wait: time.Hour, upTo: 10, runGap: time.Minute, runMost: time.Hour}

	// Three runs expected: it takes what comes until the third, an outcome that ends a run included,
	// and leaves the rest in the lane.
	reqs := make(chan finishReq, 10)
	reqs <- run(2)
	reqs <- finishReq{id: 3}
	reqs <- run(4)
	reqs <- run(5)
	batch := gatherMore([]finishReq{run(1)}, reqs, timer, g, 3)
	if got := ids(batch); !slices.Equal(got, []int64{1, 2, 3, 4}) || len(reqs) != 1 {
		t.Errorf("gathered %v with %d left; want [1 2 3 4] and 1", got, len(reqs))
	}

	// A lone run goes at once, with the outcome waiting behind it left for the next statement.
	batch = gatherMore([]finishReq{run(6)}, reqs, timer, g, 1)
	if got := ids(batch); !slices.Equal(got, []int64{6}) || len(reqs) != 1 {
		t.Errorf("gathered %v with %d left; want [6] and 1", got, len(reqs))
	}
	<-reqs

	// Runs expected that do not come (slow handlers) hold the batch for a gap, not for the wait...
	gap := g
	gap.runGap = 50 * time.Millisecond
	start := time.Now()
	batch = gatherMore([]finishReq{run(7)}, reqs, timer, gap, 5)
	if took := time.Since(start); !slices.Equal(ids(batch), []int64{7}) || took < gap.runGap || took > time.Minute {
		t.Errorf("gathered %v after %v; want [7] after %v", ids(batch), took, gap.runGap)
	}
	// ... and runs that keep coming, for runMost in all.
	most := g
	most.runMost = 50 * time.Millisecond
	go func() {
		for i := range 5 {
			time.Sleep(20 * time.Millisecond)
			reqs <- run(int64(20 + i))
		}
	}()
	start = time.Now()
	batch = gatherMore([]finishReq{run(8)}, reqs, timer, most, 9)
	if took := time.Since(start); len(batch) == 6 || took < most.runMost || took > time.Minute {
		t.Errorf("gathered %v after %v; want fewer than all 6, after %v", ids(batch), took, most.runMost)
	}
	for len(batch)+len(reqs) < 6 {
		time.Sleep(10 * time.Millisecond)
	}
	for len(reqs) > 0 {
		<-reqs
	}

	// A batch without a run waits the whole wait, but one that comes makes it a batch of runs.
	go func() {
		time.Sleep(10 * time.Millisecond)
		reqs <- finishReq{id: 9}
		reqs <- run(10)
	}()
	batch = gatherMore([]finishReq{{id: 8}}, reqs, timer, g, 1)
	if got := ids(batch); !slices.Equal(got, []int64{8, 9, 10}) {
		t.Errorf("gathered %v; want [8 9 10]", got)
	}
}
