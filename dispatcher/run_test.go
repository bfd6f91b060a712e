package dispatcher_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/backoff"
	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

func TestProcessesEveryJobOnce(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("plain_job")
	createKind(t, b.db, kind)
	jobs := make([]plainJob, 300)
	for i := range jobs {
		jobs[i] = plainJob{N: int64(i), Note: "x"}
	}
	if _, err := dispatcher.EnqueueMany(context.Background(), b.db, kind, jobs); err != nil {
		t.Fatal(err)
	}
	var seen sync.Map
	var dups atomic.Int64
	d := b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[plainJob]) error {
			if _, loaded := seen.LoadOrStore(j.Data.N, true); loaded {
				dups.Add(1)
			}
			if j.Attempt != 1 || j.MaxAttempts != jobinfo.DefaultMaxAttempts || j.Key != "" || j.Slot != -1 {
				return dispatcher.Discard(fmt.Errorf("unexpected job %+v", j))
			}
			return nil
		})
	})
	waitFor(t, "300 processed", 20*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "plain_job", "processed_at IS NOT NULL") == 300, nil
	})
	stopNow(t, d)
	if n := countWhere(t, b.db, "plain_job", "attempts_made = 1 AND lease_expires_at IS NULL AND failed_at IS NULL AND last_error IS NULL"); n != 300 || dups.Load() != 0 {
		t.Errorf("%d clean processed rows (want 300), %d duplicate runs", n, dups.Load())
	}
	if s := d.Stats(); s.Claimed != 300 || s.Processed != 300 {
		t.Errorf("stats %+v", s)
	}
}

// A job failing every time is retried with backoff and fails for good at max attempts, keeping the
// last error; one failing twice then succeeding ends processed after three attempts.
func TestRetriesThenFails(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("flaky", jobinfo.MaxAttempts(3), jobinfo.Backoff(backoff.Constant(50*time.Millisecond)))
	createKind(t, b.db, kind)
	ctx := context.Background()
	poison, _ := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 1, Note: "poison"})
	flaky, _ := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 2, Note: "twice"})
	b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[plainJob]) error {
			if j.Data.Note == "poison" || j.Attempt <= 2 {
				return fmt.Errorf("boom %d", j.Attempt)
			}
			return nil
		})
	})
	waitFor(t, "both finished", 20*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "flaky", "processed_at IS NOT NULL OR failed_at IS NOT NULL") == 2, nil
	})
	if st := readState(t, b.db, "flaky", poison.ID); st != (rowState{Attempts: 3, Failed: true, LastError: "boom 3"}) {
		t.Errorf("poison job: %+v", st)
	}
	if st := readState(t, b.db, "flaky", flaky.ID); st != (rowState{Attempts: 3, Processed: true, LastError: "boom 2"}) {
		t.Errorf("flaky job: %+v", st)
	}
}
