package dispatcher_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/uniqueness"
)

// A slot is free once its handler returns, but the claims never run far ahead of the outcomes being
// written: at most Concurrency jobs run and at most 500 (maxFinishBatch) more wait for their outcome,
// so the rows leased by the dispatcher stay within Concurrency + 500, even when writing outcomes is
// much slower than claiming (here a trigger makes each success take 2 ms).
func TestClaimsStayBoundedByOutcomesNotWritten(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("plain_job")
	createKind(t, b.db, kind)
	if _, err := b.db.Exec(context.Background(), `CREATE FUNCTION slow_success() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.processed_at IS NOT NULL THEN PERFORM pg_sleep(0.002); END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER slow_success BEFORE UPDATE ON plain_job FOR EACH ROW EXECUTE FUNCTION slow_success()`); err != nil {
		t.Fatal(err)
	}
	jobs := make([]plainJob, 3000)
	for i := range jobs {
		jobs[i] = plainJob{N: int64(i), Note: "x"}
	}
	if _, err := dispatcher.EnqueueMany(context.Background(), b.db, kind, jobs); err != nil {
		t.Fatal(err)
	}
	var running, maxRunning atomic.Int64
	cfg := b.cfg
	cfg.Concurrency, cfg.ClaimBatch = 5, 5
	b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(context.Context, *dispatcher.Job[plainJob]) error {
			n := running.Add(1)
			for m := maxRunning.Load(); n > m && !maxRunning.CompareAndSwap(m, n); m = maxRunning.Load() {
			}
			running.Add(-1)
			return nil
		})
	})
	maxLeased := 0
	waitFor(t, "3000 processed", 60*time.Second, func() (bool, error) {
		maxLeased = max(maxLeased, countWhere(t, b.db, "plain_job", "lease_expires_at IS NOT NULL"))
		return countWhere(t, b.db, "plain_job", "processed_at IS NOT NULL") == 3000, nil
	})
	if maxLeased > 505 || maxRunning.Load() > 5 {
		t.Errorf("at most %d rows leased and %d handlers running at once; want at most 505 and 5", maxLeased, maxRunning.Load())
	}
	t.Logf("at most %d rows leased, %d handlers running", maxLeased, maxRunning.Load())
}

// Finishing jobs of a plain kind wakes nobody when they end for good: a success or a failure frees
// no job for another dispatcher. A job that goes back to wait (a retry) has a due time the others
// must learn, so its finish notifies; so does every finish of a keyed kind.
func TestFinishNotifiesOnlyWhenItFreesSomething(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	plain := jobinfo.MustDefine[plainJob]("quiet_plain")
	createKind(t, b.db, plain)
	keyed := jobinfo.MustDefine[postSync]("quiet_keyed")
	createKind(t, b.db, keyed)
	notes := listenNotesAt(t, b.db, "quiet_plain", "quiet_keyed")

	var retried sync.Map
	b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
		if err := dispatcher.Register(d, plain, func(_ context.Context, j *dispatcher.Job[plainJob]) error {
			if j.Data.N == 3 {
				if _, again := retried.LoadOrStore(j.ID, true); !again {
					return dispatcher.Snooze(0)
				}
			}
			if j.Data.N == 4 {
				return dispatcher.Discard(errors.New("no"))
			}
			return nil
		}); err != nil {
			return err
		}
		return dispatcher.Register(d, keyed, func(context.Context, *dispatcher.Job[postSync]) error { return nil })
	})
	ctx := context.Background()
	// One job at a time, each finished before the next: the notifications after each enqueue are its
	// own and its finish's.
	step := func(enqueue func() error, table string, done int, want []string) {
		t.Helper()
		notes.reset()
		if err := enqueue(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the job finished", 10*time.Second, func() (bool, error) {
			return countWhere(t, b.db, table, "processed_at IS NOT NULL OR failed_at IS NOT NULL") == done, nil
		})
		time.Sleep(200 * time.Millisecond) // a notification sent by the finish has arrived by now
		if got := notes.payloads(); !equalStrings(got, want) {
			t.Errorf("notifications after enqueueing into %s: %q, want %q", table, got, want)
		}
	}
	enqueuePlain := func(n int64) func() error {
		return func() error {
			_, err := dispatcher.Enqueue(ctx, b.db, plain, plainJob{N: n, Note: "x"}, dispatcher.OnDuplicate(uniqueness.Skip))
			return err
		}
	}
	step(enqueuePlain(1), "quiet_plain", 1, []string{"quiet_plain"})                // processed: the insert's only
	step(enqueuePlain(4), "quiet_plain", 2, []string{"quiet_plain"})                // discarded: the insert's only
	step(enqueuePlain(3), "quiet_plain", 3, []string{"quiet_plain", "quiet_plain"}) // snoozed (notified), then processed
	step(func() error {
		_, err := dispatcher.Enqueue(ctx, b.db, keyed, postSync{BlogID: 1, Seq: 1})
		return err
	}, "quiet_keyed", 1, []string{"quiet_keyed", "quiet_keyed"})
}

// notes collects the notifications of the jobpipe channel.
type notes struct {
	mu  sync.Mutex
	got []note
}

// note is one notification and when it arrived.
type note struct {
	payload string
	at      time.Time
}

func (n *notes) reset() { n.mu.Lock(); n.got = nil; n.mu.Unlock() }

func (n *notes) get() []note {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]note(nil), n.got...)
}

// payloads are the payloads received so far.
func (n *notes) payloads() []string {
	var out []string
	for _, x := range n.get() {
		out = append(out, x.payload)
	}
	return out
}

// listenNotesAt listens on the jobpipe channel of db until the test ends, keeping the notifications
// whose payload is one of kinds: tests running at the same time share the database's channel.
func listenNotesAt(t *testing.T, db *pgxpool.Pool, kinds ...string) *notes {
	t.Helper()
	conn, err := db.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), `LISTEN `+uniqueness.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &notes{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			got, err := conn.Conn().WaitForNotification(ctx)
			if err != nil {
				return
			}
			if !slices.Contains(kinds, got.Payload) {
				continue
			}
			n.mu.Lock()
			n.got = append(n.got, note{payload: got.Payload, at: time.Now()})
			n.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		conn.Release()
	})
	return n
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// While a plain kind has a backlog, claims start at the lowest id the last one got (past the index
// entries of worked jobs); a job below that id that waits again is still found within a second, long
// before the backlog runs out.
func TestJobWaitingAgainBelowTheClaimsIsFound(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("plain_job")
	createKind(t, b.db, kind)
	jobs := make([]plainJob, 3000)
	for i := range jobs {
		jobs[i] = plainJob{N: int64(i), Note: "x"}
	}
	if _, err := dispatcher.EnqueueMany(context.Background(), b.db, kind, jobs); err != nil {
		t.Fatal(err)
	}
	var snoozed atomic.Bool
	var snoozedAt, rerunAt atomic.Int64
	var backlogAtRerun atomic.Int64
	var done atomic.Int64
	cfg := b.cfg
	cfg.Concurrency, cfg.ClaimBatch = 10, 10
	b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(_ context.Context, j *dispatcher.Job[plainJob]) error {
			if j.Data.N == 0 {
				if !snoozed.Swap(true) { // a snooze does not count as an attempt
					snoozedAt.Store(time.Now().UnixNano())
					return dispatcher.Snooze(0)
				}
				rerunAt.Store(time.Now().UnixNano())
				backlogAtRerun.Store(3000 - done.Load())
			}
			time.Sleep(5 * time.Millisecond)
			done.Add(1)
			return nil
		})
	})
	waitFor(t, "3000 processed", 60*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "plain_job", "processed_at IS NOT NULL") == 3000, nil
	})
	wait := time.Duration(rerunAt.Load() - snoozedAt.Load())
	t.Logf("the snoozed job ran again %v later, with %d jobs still to do", wait, backlogAtRerun.Load())
	if rerunAt.Load() == 0 || wait > 1500*time.Millisecond || backlogAtRerun.Load() < 500 {
		t.Errorf("the snoozed job ran again %v later with %d jobs still to do; want within 1.5 s, well before the backlog ran out", wait, backlogAtRerun.Load())
	}
}
