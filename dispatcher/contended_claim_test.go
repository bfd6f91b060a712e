package dispatcher_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// A claim pass that chose a head whose queue lock another dispatcher holds claims the rest and looks
// again soon, not at the next poll: the other dispatcher may give the slot back without claiming
// the job (it claims no more than it has workers for), and nothing else would wake this one. Here
// the other dispatcher is a Locker holding key 1's queue lock while the pass runs; key 2's job runs
// on and never finishes, so no finish wakes the dispatcher either.
func TestContendedClaimPassLooksAgainBeforeThePoll(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	ctx := context.Background()
	kind := jobinfo.MustDefine[postSync]("contended_claim")
	createKind(t, b.db, kind)
	held := b.holdQueueLock(t, kind.Info().Name, "1", 0)
	started := make(chan int64, 2)
	release := make(chan struct{})
	c := b.cfg
	c.PollInterval = time.Hour
	d := b.start(t, c, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[postSync]) error {
			started <- j.Data.BlogID
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		})
	})
	t.Cleanup(func() { close(release) }) // before Stop, which waits for the handlers
	if _, err := dispatcher.EnqueueMany(ctx, b.db, kind, []postSync{{BlogID: 1, Seq: 1}, {BlogID: 2, Seq: 1}}); err != nil {
		t.Fatal(err)
	}
	select {
	case key := <-started:
		if key != 2 {
			t.Fatalf("key %d started while its queue lock was held elsewhere; want key 2", key)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("key 2's job had not started 5 s after it was enqueued")
	}
	time.Sleep(200 * time.Millisecond) // the pass that found key 1 taken has ended
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	select {
	case key := <-started:
		if key != 1 {
			t.Fatalf("started key %d, want key 1", key)
		}
		if took := time.Since(freed); took > 2*time.Second {
			t.Errorf("key 1 started %v after its slot was given back; want well under the 1 h poll", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("key 1 had not started 5 s after its slot was given back (stats %+v): the contended pass waits for the poll", d.Stats())
	}
}
