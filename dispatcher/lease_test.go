package dispatcher_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/backoff"
	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// startedJob is what a blocking handler reports when it starts and when it ends.
type startedJob struct {
	id, token int64
	cause     chan error // the context's cause once it is cancelled
}

// blockingHandler starts each job, reports it, and waits until its context is cancelled or release is
// closed.
func blockingHandler(started chan<- startedJob, release <-chan struct{}) dispatcher.Handler[postSync] {
	return func(ctx context.Context, j *dispatcher.Job[postSync]) error {
		s := startedJob{id: j.ID, token: j.Token, cause: make(chan error, 1)}
		started <- s
		select {
		case <-ctx.Done():
			s.cause <- context.Cause(ctx)
			return ctx.Err()
		case <-release:
			return nil
		}
	}
}

// When a heartbeat cannot renew the lease (here the execution lock vanished from Redis, or the row's
// token moved on), the handler's context is cancelled with ErrLeaseLost as cause, and the attempt is
// not recorded as done.
func TestHeartbeatFailureCancelsTheJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		takeAway func(t *testing.T, b *runBundle, s startedJob)
		// wantRetried: the row went back to wait (the fence held); otherwise it was left to its new owner.
		wantRetried bool
	}{
		{"execution lock lost in Redis", func(t *testing.T, b *runBundle, s startedJob) {
			keys, err := b.redis.Clients[0].Keys(context.Background(), b.redis.Prefix+"x:*").Result()
			if err != nil || len(keys) != 1 {
				t.Fatalf("execution lock keys %v, %v", keys, err)
			}
			b.redis.Clients[0].Del(context.Background(), keys[0])
		}, true},
		{"row taken back", func(t *testing.T, b *runBundle, s startedJob) {
			// What a rescuer does to an expired lease: the worker's token is no longer the row's.
			// (with its backoff, so this dispatcher does not claim it again meanwhile).
			_, err := b.db.Exec(context.Background(), `UPDATE post_sync SET lock_token = lock_token + 1,
				lease_expires_at = NULL, lock_slot = NULL, last_error = 'taken back',
				process_after = now() + interval '1 hour' WHERE id = $1`, s.id)
			if err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newRun(t)
			kind := jobinfo.MustDefine[postSync]("post_sync", jobinfo.Backoff(backoff.Constant(time.Hour)))
			createKind(t, b.db, kind)
			job, _ := dispatcher.Enqueue(context.Background(), b.db, kind, postSync{BlogID: 1, Seq: 1})
			started := make(chan startedJob, 1)
			cfg := b.cfg
			cfg.LeaseTTL, cfg.HeartbeatInterval = 900*time.Millisecond, 150*time.Millisecond
			d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
				return dispatcher.Register(d, kind, blockingHandler(started, nil))
			})
			s := <-started
			time.Sleep(400 * time.Millisecond) // heartbeats have renewed the lease meanwhile
			tc.takeAway(t, b, s)
			select {
			case cause := <-s.cause:
				if !errors.Is(cause, dispatcher.ErrLeaseLost) {
					t.Fatalf("cause = %v, want ErrLeaseLost", cause)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the handler was not cancelled")
			}
			stopNow(t, d)
			st := readState(t, b.db, "post_sync", job.ID)
			if st.Processed || st.Failed || st.Attempts != 1 {
				t.Errorf("row after the lost lease: %+v", st)
			}
			if tc.wantRetried != strings.HasPrefix(st.LastError, "dispatcher: the job's lease was lost") ||
				(!tc.wantRetried && st.LastError != "taken back") {
				t.Errorf("last_error = %q", st.LastError)
			}
			// A lost lease whose row was still the attempt's ends as a lost lease; one whose row was
			// taken back, as a stale finish.
			lost, stale := int64(1), int64(0)
			if !tc.wantRetried {
				lost, stale = 0, 1
			}
			if got := d.Stats(); got.LeasesLost != lost || got.StaleFinishes != stale || got.Processed != 0 {
				t.Errorf("stats %+v; want %d lost leases and %d stale finishes", got, lost, stale)
			}
		})
	}
}

// A worker whose row was taken back meanwhile finishes with a stale token: its finish changes nothing.
func TestStaleFinishChangesNothing(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("post_sync")
	createKind(t, b.db, kind)
	job, _ := dispatcher.Enqueue(context.Background(), b.db, kind, postSync{BlogID: 1, Seq: 1})
	started, release := make(chan startedJob, 1), make(chan struct{})
	d := b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, blockingHandler(started, release))
	})
	s := <-started
	tag, err := b.db.Exec(context.Background(), `UPDATE post_sync SET lock_token = lock_token + 1 WHERE id = $1 AND lock_token = $2`, s.id, s.token)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatal(tag, err)
	}
	close(release) // the handler returns success with its old token
	waitFor(t, "the stale finish", 5*time.Second, func() (bool, error) { return d.Stats().StaleFinishes == 1, nil })
	var processed bool
	var leased bool
	if err := b.db.QueryRow(context.Background(), `SELECT processed_at IS NOT NULL, lease_expires_at IS NOT NULL FROM post_sync WHERE id = $1`, job.ID).
		Scan(&processed, &leased); err != nil {
		t.Fatal(err)
	}
	if processed || !leased {
		t.Errorf("after a stale finish: processed=%v leased=%v; want the row untouched (leased, not processed)", processed, leased)
	}
	// Its key run ended with the job it lost.
	want := [len(dispatcher.Stats{}.KeyRunsEnded)]int64{dispatcher.RunEndLost: 1}
	waitFor(t, "the run's end", 5*time.Second, func() (bool, error) { return d.Stats().KeyRunsEnded == want, nil })
}

// Stop lets finished work be recorded, cancels what runs past its deadline with ErrShutdown, puts
// those jobs back to wait, and leaves no lock in Redis and no row leased.
func TestGracefulStop(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("post_sync")
	createKind(t, b.db, kind)
	ctx := context.Background()
	for k := range 3 {
		if _, err := dispatcher.Enqueue(ctx, b.db, kind, postSync{BlogID: int64(k), Seq: 1}); err != nil {
			t.Fatal(err)
		}
	}
	started := make(chan startedJob, 3)
	d := b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, blockingHandler(started, nil))
	})
	var jobs []startedJob
	for range 3 {
		jobs = append(jobs, <-started)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := d.Stop(stopCtx); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop = %v, want the deadline reported", err)
	}
	for _, j := range jobs {
		if cause := <-j.cause; !errors.Is(cause, dispatcher.ErrShutdown) {
			t.Errorf("job %d cause = %v, want ErrShutdown", j.id, cause)
		}
	}
	if n := countWhere(t, b.db, "post_sync", "lease_expires_at IS NOT NULL OR lock_slot IS NOT NULL"); n != 0 {
		t.Errorf("%d rows still leased after Stop", n)
	}
	if n := countWhere(t, b.db, "post_sync", "attempts_made = 1 AND process_after <= now() AND last_error LIKE 'dispatcher: stopping%'"); n != 3 {
		t.Errorf("%d rows back to wait, want 3", n)
	}
	if got, want := d.Stats().KeyRunsEnded, [len(dispatcher.Stats{}.KeyRunsEnded)]int64{dispatcher.RunEndStopped: 3}; got != want {
		t.Errorf("key runs ended %v, want %v: each job's run, at Stop", got, want)
	}
	keys, err := b.redis.Clients[0].Keys(ctx, b.redis.Prefix+"*").Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("Redis keys left after Stop: %v (%v)", keys, err)
	}
	var leaders int
	if err := b.db.QueryRow(ctx, `SELECT count(*) FROM jobpipe_leaders`).Scan(&leaders); err != nil || leaders != 0 {
		t.Errorf("%d leader leases left after Stop (%v)", leaders, err)
	}
}

// The leader takes back jobs whose lease expired: retried with the attempt counted, or failed at max
// attempts with the reason kept.
func TestRescueExpiredLeases(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("plain_job", jobinfo.MaxAttempts(2), jobinfo.Backoff(backoff.Constant(time.Millisecond)))
	createKind(t, b.db, kind)
	ctx := context.Background()
	again, _ := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 1})
	dead, _ := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 2})
	// Both were claimed by a worker that died: leases expired. One has an attempt left.
	_, err := b.db.Exec(ctx, `UPDATE plain_job SET started_at = now(), lease_owner = 'crashed-node', lock_token = 1,
		lease_expires_at = now() - interval '1 second', attempts_made = CASE WHEN id = $1 THEN 1 ELSE 2 END`, again.ID)
	if err != nil {
		t.Fatal(err)
	}
	attempts := make(chan *dispatcher.Job[plainJob], 2)
	cfg := b.cfg
	cfg.RescueInterval = 100 * time.Millisecond
	b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[plainJob]) error {
			attempts <- j
			return nil
		})
	})
	select {
	case j := <-attempts:
		if j.ID != again.ID || j.Attempt != 2 || j.Token != 3 {
			t.Errorf("rescued job ran as id %d attempt %d token %d; want %d, 2, 3", j.ID, j.Attempt, j.Token, again.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the rescued job did not run")
	}
	waitFor(t, "both finished", 5*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "plain_job", "processed_at IS NOT NULL OR failed_at IS NOT NULL") == 2, nil
	})
	want := rowState{Attempts: 2, Failed: true, LastError: "lease expired: crashed-node stopped renewing it (worker died or stalled)"}
	if st := readState(t, b.db, "plain_job", dead.ID); st != want {
		t.Errorf("job out of attempts: %+v, want %+v", st, want)
	}
}

type metered struct {
	Account string         `jobpipe:"account"`
	Limits  map[string]int `jobpipe:"limits"`
}

// A row whose data does not decode into the Go type fails with a clear error, and never reaches the
// handler; other jobs go on.
func TestUndecodableRowFails(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[metered]("metered")
	createKind(t, b.db, kind)
	ctx := context.Background()
	var badID int64
	if err := b.db.QueryRow(ctx, `INSERT INTO metered (account, limits) VALUES ('x', '{"a": "not a number"}') RETURNING id`).Scan(&badID); err != nil {
		t.Fatal(err)
	}
	good, _ := dispatcher.Enqueue(ctx, b.db, kind, metered{Account: "y", Limits: map[string]int{"a": 1}})
	ran := make(chan int64, 2)
	b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[metered]) error {
			ran <- j.ID
			return nil
		})
	})
	waitFor(t, "both finished", 10*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "metered", "processed_at IS NOT NULL OR failed_at IS NOT NULL") == 2, nil
	})
	if id := <-ran; id != good.ID || len(ran) != 0 {
		t.Errorf("handler ran %d (and %d more), want only %d", id, len(ran), good.ID)
	}
	st := readState(t, b.db, "metered", badID)
	if !st.Failed || !strings.HasPrefix(st.LastError, `the job's data does not decode into its Go type: column "limits": `) {
		t.Errorf("undecodable row: %+v", st)
	}
}

// Dispatchers may run different kinds: each kind is rescued by one of the dispatchers that run it,
// even when another dispatcher, which does not run it, was elected first.
func TestRescueLeadershipIsPerKind(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	ctx := context.Background()
	mails := jobinfo.MustDefine[plainJob]("mail_job")
	hooks := jobinfo.MustDefine[plainJob]("hook_job", jobinfo.Backoff(backoff.Constant(time.Millisecond)))
	createKind(t, b.db, mails)
	createKind(t, b.db, hooks)
	cfg := b.cfg
	cfg.RescueInterval = 100 * time.Millisecond
	cfg.NodeName = "mail-node"
	b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, mails, func(context.Context, *dispatcher.Job[plainJob]) error { return nil })
	})
	waitFor(t, "the first node to lead", 5*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "jobpipe_leaders", "holder = 'mail-node'") > 0, nil
	})
	dead, _ := dispatcher.Enqueue(ctx, b.db, hooks, plainJob{N: 1})
	if _, err := b.db.Exec(ctx, `UPDATE hook_job SET started_at = now(), lease_owner = 'crashed-node', lock_token = 1,
		lease_expires_at = now() - interval '1 second', attempts_made = 1 WHERE id = $1`, dead.ID); err != nil {
		t.Fatal(err)
	}
	cfg.NodeName = "hook-node"
	b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, hooks, func(context.Context, *dispatcher.Job[plainJob]) error { return nil })
	})
	waitFor(t, "the dead hook job rescued and run", 10*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "hook_job", "processed_at IS NOT NULL AND attempts_made = 2") == 1, nil
	})
	if n := countWhere(t, b.db, "jobpipe_leaders", "(name, holder) IN (('rescue:mail_job', 'mail-node'), ('rescue:hook_job', 'hook-node'))"); n != 2 {
		t.Errorf("%d of the 2 per-kind leases are held by the nodes running the kind", n)
	}
}
