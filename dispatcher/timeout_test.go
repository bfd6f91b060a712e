package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/backoff"
	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// jobRow is where a job stands after an attempt that went back to wait.
type jobRow struct {
	Attempts          int
	Processed, Failed bool
	LastError         string
	Leased, Slotted   bool          // lease_expires_at, lock_slot set
	Waits             time.Duration // process_after - now(), rounded to the minute
}

func readJobRow(t *testing.T, db *pgxpool.Pool, table string, id int64) jobRow {
	t.Helper()
	var r jobRow
	var waits float64
	err := db.QueryRow(context.Background(), `SELECT attempts_made, processed_at IS NOT NULL, failed_at IS NOT NULL,
		coalesce(last_error, ''), lease_expires_at IS NOT NULL, lock_slot IS NOT NULL,
		round(extract(epoch FROM coalesce(process_after, now()) - now()) / 60) * 60
		FROM `+table+` WHERE id = $1`, id).Scan(&r.Attempts, &r.Processed, &r.Failed, &r.LastError, &r.Leased, &r.Slotted, &waits)
	if err != nil {
		t.Fatal(err)
	}
	r.Waits = time.Duration(waits) * time.Second
	return r
}

// timedKind is a keyed kind whose handlers may run 300 ms, whose retries wait an hour, and in which a
// key's later job may start while an earlier one waits for its retry: the key's next job then shows
// whether the key was given back.
func timedKind(t *testing.T, b *runBundle) *jobinfo.Kind[postSync] {
	t.Helper()
	kind := jobinfo.MustDefine[postSync]("post_sync", jobinfo.Timeout(300*time.Millisecond),
		jobinfo.Backoff(backoff.Constant(time.Hour)), jobinfo.WithOrder(jobinfo.OrderProcessAfter))
	createKind(t, b.db, kind)
	return kind
}

// A handler that honours its context and blocks past its kind's timeout finds the deadline, with a
// cause that names the timeout; its attempt is retried with backoff, says it timed out, is logged at
// WARN and counted, and the key's next job runs.
func TestTimeoutRetriesTheJobAndFreesItsKey(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := timedKind(t, b)
	ctx := context.Background()
	first, _ := dispatcher.Enqueue(ctx, b.db, kind, postSync{BlogID: 1, Seq: 1})
	second, _ := dispatcher.Enqueue(ctx, b.db, kind, postSync{BlogID: 1, Seq: 2})
	type seen struct {
		left  time.Duration // deadline - start, 0 without one
		cause error
	}
	seenFirst := make(chan seen, 1)
	logs, rec := &logRecorder{}, newRecorder()
	cfg := b.cfg
	cfg.Logger, cfg.Observer = logs.logger(), rec
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[postSync]) error {
			if j.Data.Seq != 1 {
				return nil
			}
			var s seen
			if deadline, ok := ctx.Deadline(); ok {
				s.left = time.Until(deadline)
			}
			<-ctx.Done()
			s.cause = context.Cause(ctx)
			seenFirst <- s
			return ctx.Err()
		})
	})
	waitFor(t, "the key's next job processed", 20*time.Second, func() (bool, error) {
		return readJobRow(t, b.db, "post_sync", second.ID).Processed, nil
	})
	stopNow(t, d) // every outcome is recorded and observed
	s := <-seenFirst
	if s.left <= 0 || s.left > 300*time.Millisecond {
		t.Errorf("the handler's deadline was %v away, want at most the timeout (300ms)", s.left)
	}
	if !errors.Is(s.cause, dispatcher.ErrTimeout) || s.cause.Error() != "dispatcher: the job ran past its timeout of 300ms" {
		t.Errorf("cause = %v, want ErrTimeout naming 300ms", s.cause)
	}
	want := jobRow{Attempts: 1, LastError: "dispatcher: the job ran past its timeout of 300ms: context deadline exceeded", Waits: time.Hour}
	if got := readJobRow(t, b.db, "post_sync", first.ID); got != want {
		t.Errorf("timed-out job: %+v, want %+v", got, want)
	}
	if got := readJobRow(t, b.db, "post_sync", second.ID); got != (jobRow{Attempts: 1, Processed: true}) {
		t.Errorf("the key's next job: %+v", got)
	}
	if st := d.Stats(); st.TimedOut != 1 || st.Retried != 0 || st.Processed != 1 || st.Abandoned != 0 || st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
	if got, _ := rec.outcomes("post_sync"); fmt.Sprint(got) != fmt.Sprint(map[dispatcher.Outcome]int{dispatcher.OutcomeProcessed: 1, dispatcher.OutcomeTimedOut: 1}) {
		t.Errorf("observed outcomes %v, want processed 1 and timed_out 1", got)
	}
	warns := logs.at(slog.LevelWarn)
	if len(warns) != 1 || warns[0].msg != "dispatcher: the job ran past its timeout" || warns[0].attrs["id"] != fmt.Sprint(first.ID) ||
		warns[0].attrs["timeout"] != "300ms" || warns[0].attrs["err"] != want.LastError {
		t.Errorf("warnings logged: %+v, want one that the job ran past its timeout", warns)
	}
}

// A handler that ignores its context cannot keep its key: HandlerGrace after its timeout, the worker
// stops waiting for it, records the retry and gives the key to its next job, while the handler is
// still blocked. What the handler does once it returns changes nothing: its heartbeat is refused and
// a RegisterTx handler's writes roll back.
func TestHandlerIgnoringItsTimeoutCannotKeepItsKey(t *testing.T) {
	t.Parallel()
	for _, txMode := range []bool{false, true} {
		t.Run(fmt.Sprintf("tx=%t", txMode), func(t *testing.T) {
			t.Parallel()
			b := newRun(t)
			kind := timedKind(t, b)
			ctx := context.Background()
			if _, err := b.db.Exec(ctx, `CREATE TABLE late_writes (id int PRIMARY KEY)`); err != nil {
				t.Fatal(err)
			}
			first, _ := dispatcher.Enqueue(ctx, b.db, kind, postSync{BlogID: 1, Seq: 1})
			second, _ := dispatcher.Enqueue(ctx, b.db, kind, postSync{BlogID: 1, Seq: 2})
			release := make(chan struct{})
			released := sync.OnceFunc(func() { close(release) })
			lateHeartbeat, wrote, returned := make(chan error, 1), make(chan struct{}), make(chan struct{})
			handle := func(ctx context.Context, tx pgx.Tx, j *dispatcher.Job[postSync]) error {
				if j.Data.Seq != 1 {
					return nil
				}
				defer close(returned)
				<-release // ignores ctx
				lateHeartbeat <- j.Heartbeat(context.Background())
				if tx != nil {
					if _, err := tx.Exec(context.Background(), `INSERT INTO late_writes VALUES (1)`); err != nil {
						return err
					}
				}
				close(wrote)
				return nil
			}
			logs := &logRecorder{}
			cfg := b.cfg
			cfg.Logger, cfg.HandlerGrace = logs.logger(), 500*time.Millisecond
			d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
				if txMode {
					return dispatcher.RegisterTx(d, kind, handle)
				}
				return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[postSync]) error { return handle(ctx, nil, j) })
			})
			t.Cleanup(released) // before the dispatcher's Stop: no goroutine outlives the test
			waitFor(t, "the key's next job processed", 20*time.Second, func() (bool, error) {
				return readJobRow(t, b.db, "post_sync", second.ID).Processed, nil
			})
			select {
			case <-returned:
				t.Fatal("the first handler returned although it was never released")
			default:
			}
			const lastError = "dispatcher: the job ran past its timeout of 300ms: the handler did not return within 500ms and was abandoned"
			want := jobRow{Attempts: 1, LastError: lastError, Waits: time.Hour}
			if got := readJobRow(t, b.db, "post_sync", first.ID); got != want {
				t.Errorf("abandoned job: %+v, want %+v", got, want)
			}
			// Counted once each outcome's write has returned, which may be a moment after it committed.
			waitFor(t, "both outcomes counted", 10*time.Second, func() (bool, error) {
				st := d.Stats()
				return st.TimedOut+st.Processed == 2, nil
			})
			if st := d.Stats(); st.Abandoned != 1 || st.TimedOut != 1 || st.Retried != 0 || st.Processed != 1 {
				t.Errorf("stats %+v", st)
			}
			warns := logs.at(slog.LevelWarn)
			if len(warns) != 1 || warns[0].attrs["id"] != fmt.Sprint(first.ID) || warns[0].attrs["cause"] != "dispatcher: the job ran past its timeout of 300ms" ||
				warns[0].msg != "dispatcher: the handler did not return after its context ended; the worker stopped waiting for it and its goroutine runs on" {
				t.Errorf("warnings logged: %+v, want one that the handler was abandoned", warns)
			}

			released()
			if err := <-lateHeartbeat; !errors.Is(err, dispatcher.ErrLeaseLost) ||
				err.Error() != "dispatcher: the job's lease was lost: the attempt has ended and its outcome is recorded" {
				t.Errorf("the late handler's heartbeat: %v", err)
			}
			<-wrote
			if txMode {
				// Blocks until the late handler's transaction ends: inserted only if it rolled back.
				qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				tag, err := b.db.Exec(qctx, `INSERT INTO late_writes VALUES (1) ON CONFLICT DO NOTHING`)
				if err != nil || tag.RowsAffected() != 1 {
					t.Errorf("the late handler's write was committed (or the check failed: %v)", err)
				}
			}
			<-returned
			stopNow(t, d)
			if got := readJobRow(t, b.db, "post_sync", first.ID); got != want {
				t.Errorf("after the late handler returned: %+v, want %+v", got, want)
			}
			if st := d.Stats(); st.Processed != 1 || st.LeasesLost != 0 || st.StaleFinishes != 0 {
				t.Errorf("stats after the late handler returned: %+v", st)
			}
		})
	}
}

// A handler that returns nil after its deadline, within the grace, has done its work: the job is
// processed. A RegisterTx handler's transaction cannot commit once its context has ended: its attempt is
// retried as timed out and its writes roll back.
func TestNilAfterTheDeadline(t *testing.T) {
	t.Parallel()
	for _, txMode := range []bool{false, true} {
		t.Run(fmt.Sprintf("tx=%t", txMode), func(t *testing.T) {
			t.Parallel()
			b := newRun(t)
			kind := jobinfo.MustDefine[plainJob]("late_job", jobinfo.Timeout(200*time.Millisecond), jobinfo.Backoff(backoff.Constant(time.Hour)))
			createKind(t, b.db, kind)
			ctx := context.Background()
			if _, err := b.db.Exec(ctx, `CREATE TABLE late_writes (id int PRIMARY KEY)`); err != nil {
				t.Fatal(err)
			}
			job, _ := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 1})
			handle := func(ctx context.Context, tx pgx.Tx, j *dispatcher.Job[plainJob]) error {
				if tx != nil {
					if _, err := tx.Exec(ctx, `INSERT INTO late_writes VALUES (1)`); err != nil {
						return err
					}
				}
				<-ctx.Done()
				return nil
			}
			d := b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
				if txMode {
					return dispatcher.RegisterTx(d, kind, handle)
				}
				return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[plainJob]) error { return handle(ctx, nil, j) })
			})
			waitFor(t, "the attempt recorded", 20*time.Second, func() (bool, error) {
				return countWhere(t, b.db, "late_job", "lease_expires_at IS NULL AND attempts_made = 1") == 1, nil
			})
			stopNow(t, d)
			want, stats := jobRow{Attempts: 1, Processed: true}, dispatcher.Stats{Claimed: 1, Processed: 1}
			if txMode {
				want = jobRow{Attempts: 1, LastError: "dispatcher: the job ran past its timeout of 200ms", Waits: time.Hour}
				stats = dispatcher.Stats{Claimed: 1, TimedOut: 1}
			}
			if got := readJobRow(t, b.db, "late_job", job.ID); got != want {
				t.Errorf("job: %+v, want %+v", got, want)
			}
			if got := d.Stats(); got != stats {
				t.Errorf("stats %+v, want %+v", got, stats)
			}
			if n := countWhere(t, b.db, "late_writes", "true"); n != 0 {
				t.Errorf("%d late writes committed", n)
			}
		})
	}
}

// Every kind's handlers have a deadline, DefaultTimeout unless the kind sets one; a negative timeout
// sets none.
func TestTimeoutDefaultAndDisabled(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	byDefault := jobinfo.MustDefine[plainJob]("default_timeout")
	disabled := jobinfo.MustDefine[plainJob]("no_timeout", jobinfo.Timeout(jobinfo.NoTimeout))
	createKind(t, b.db, byDefault)
	createKind(t, b.db, disabled)
	ctx := context.Background()
	if _, err := dispatcher.Enqueue(ctx, b.db, byDefault, plainJob{N: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := dispatcher.Enqueue(ctx, b.db, disabled, plainJob{N: 2}); err != nil {
		t.Fatal(err)
	}
	left := make(chan time.Duration, 2) // per job: how far its deadline was, -1 without one
	record := func(ctx context.Context, j *dispatcher.Job[plainJob]) error {
		if deadline, ok := ctx.Deadline(); ok {
			left <- time.Until(deadline)
		} else {
			left <- -1
		}
		return nil
	}
	d := b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
		return errors.Join(dispatcher.Register(d, byDefault, record), dispatcher.Register(d, disabled, record))
	})
	waitFor(t, "both processed", 20*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "default_timeout", "processed_at IS NOT NULL")+countWhere(t, b.db, "no_timeout", "processed_at IS NOT NULL") == 2, nil
	})
	stopNow(t, d)
	got := map[bool]int{} // has a deadline of about DefaultTimeout: count
	for range 2 {
		l := <-left
		switch {
		case l == -1:
			got[false]++
		case l > jobinfo.DefaultTimeout-10*time.Second && l <= jobinfo.DefaultTimeout:
			got[true]++
		default:
			t.Errorf("a deadline %v away", l)
		}
	}
	if got[true] != 1 || got[false] != 1 {
		t.Errorf("deadlines: %v, want one of about %v and one without", got, jobinfo.DefaultTimeout)
	}
	if st := d.Stats(); st.TimedOut != 0 || st.Processed != 2 {
		t.Errorf("stats %+v", st)
	}
}

// Stop does not hang on a handler that ignores its cancellation: HandlerGrace after Stop's deadline
// the handler is abandoned, its job goes back to wait as an interrupted one, and Stop returns.
func TestStopAbandonsHandlersThatIgnoreCancellation(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("stuck_job", jobinfo.Timeout(jobinfo.NoTimeout))
	createKind(t, b.db, kind)
	job, _ := dispatcher.Enqueue(context.Background(), b.db, kind, plainJob{N: 1})
	started, release := make(chan struct{}), make(chan struct{})
	cfg := b.cfg
	cfg.HandlerGrace = 500 * time.Millisecond
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[plainJob]) error {
			close(started)
			<-release // ignores ctx
			return nil
		})
	})
	t.Cleanup(func() { close(release) }) // before the dispatcher's Stop: no goroutine outlives the test
	<-started
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		stopped <- d.Stop(ctx)
	}()
	select {
	case err := <-stopped:
		if err == nil || err.Error() != "dispatcher: Stop: running jobs were cancelled at the deadline: context deadline exceeded" {
			t.Errorf("Stop: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return while a handler ignored its cancellation")
	}
	want := jobRow{Attempts: 1, LastError: "dispatcher: stopping: the job was interrupted: the handler did not return within 500ms and was abandoned"}
	if got := readJobRow(t, b.db, "stuck_job", job.ID); got != want {
		t.Errorf("abandoned job: %+v, want %+v", got, want)
	}
	if st := d.Stats(); st.Abandoned != 1 || st.Retried != 1 || st.TimedOut != 0 {
		t.Errorf("stats %+v", st)
	}
}
