package dispatcher_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

type postSync struct {
	BlogID int64 `jobpipe:"blog_id,key"`
	Seq    int64 `jobpipe:"seq"`
}

// keyWatch records, as the handlers see it, how many jobs of each key run at once and in which order
// they start.
type keyWatch struct {
	mu      sync.Mutex
	running map[int64]int
	maxSeen map[int64]int
	order   map[int64][]int64
}

func newKeyWatch() *keyWatch {
	return &keyWatch{running: map[int64]int{}, maxSeen: map[int64]int{}, order: map[int64][]int64{}}
}

func (w *keyWatch) enter(key, seq int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running[key]++
	w.maxSeen[key] = max(w.maxSeen[key], w.running[key])
	w.order[key] = append(w.order[key], seq)
}

func (w *keyWatch) leave(key int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running[key]--
}

// Three dispatchers work 20 keys x 15 jobs: never two jobs of a key at once, and each key's jobs start
// in the order they were enqueued.
func TestKeyedOneAtATimeInOrder(t *testing.T) {
	t.Parallel()
	const keys, perKey = 20, 15
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("post_sync")
	createKind(t, b.db, kind)
	var jobs []postSync
	for seq := range perKey {
		for k := range keys {
			jobs = append(jobs, postSync{BlogID: int64(k), Seq: int64(seq)})
		}
	}
	if _, err := dispatcher.EnqueueMany(context.Background(), b.db, kind, jobs); err != nil {
		t.Fatal(err)
	}
	w := newKeyWatch()
	for i := range 3 {
		cfg := b.cfg
		cfg.NodeName = fmt.Sprintf("node-%d", i)
		cfg.Concurrency = 8
		b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
			return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[postSync]) error {
				w.enter(j.Data.BlogID, j.Data.Seq)
				defer w.leave(j.Data.BlogID)
				if j.Slot != 0 || j.Key != fmt.Sprint(j.Data.BlogID) {
					return dispatcher.Discard(fmt.Errorf("key %q slot %d for blog %d", j.Key, j.Slot, j.Data.BlogID))
				}
				time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
				return nil
			})
		})
	}
	waitFor(t, "all processed", 30*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "post_sync", "processed_at IS NOT NULL") == keys*perKey, nil
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range int64(keys) {
		if w.maxSeen[k] != 1 {
			t.Errorf("key %d: %d jobs ran at once", k, w.maxSeen[k])
		}
		for i, seq := range w.order[k] {
			if seq != int64(i) {
				t.Fatalf("key %d started in order %v", k, w.order[k])
			}
		}
	}
	if n := countWhere(t, b.db, "post_sync", "attempts_made <> 1 OR last_error IS NOT NULL"); n != 0 {
		t.Errorf("%d jobs needed more than one attempt or failed", n)
	}
}

// A scheduled job never starts before its process_after, measured on the database's clock.
func TestScheduledJobsNeverEarly(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("reminder_job")
	createKind(t, b.db, kind)
	ctx := context.Background()
	type start struct {
		after, at time.Time
	}
	starts := make(chan start, 20)
	cfg := b.cfg
	cfg.PollInterval = time.Hour // only the scheduled-time timer and notifications may wake it
	b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[plainJob]) error {
			var now time.Time
			if err := b.db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
				return err
			}
			starts <- start{after: *j.ProcessAfter, at: now}
			return nil
		})
	})
	// Enqueued once the dispatcher runs, so that the time it takes to start, long on a busy machine,
	// is not counted as lateness.
	for i := range 20 {
		if _, err := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: int64(i)}, dispatcher.ProcessIn(time.Duration(100+i*40)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	var late time.Duration
	for range 20 {
		select {
		case s := <-starts:
			if s.at.Before(s.after) {
				t.Errorf("a job due at %v started at %v", s.after, s.at)
			}
			late = max(late, s.at.Sub(s.after))
		case <-time.After(10 * time.Second):
			t.Fatal("scheduled jobs did not all start")
		}
	}
	// Woken by the timer for the next scheduled time, not by the (hour-long) poll.
	if late > time.Second {
		t.Errorf("a job started %v after it was due", late)
	}
	t.Logf("latest start after due time: %v", late)
}
