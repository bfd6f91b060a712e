package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/execlock"
)

// running is the lease of one running job: its row's lease (fenced by the token) and, for keyed kinds,
// its execution lock. Heartbeats renew both; any failure, or the local deadline passing first, cancels
// the job's context with a cause wrapping ErrLeaseLost.
type running struct {
	k      *kindRunner
	id     int64
	token  int64
	lock   *execlock.Lock // nil for kinds without a key
	cancel context.CancelCauseFunc

	mu       sync.Mutex // serialises heartbeats: explicit ones and the automatic loop
	deadline time.Time  // when the lease runs out by the local clock; guarded by mu
	watchdog *time.Timer
	ended    bool // the attempt's outcome is decided: no heartbeat renews it any more; guarded by mu

	lostMu sync.Mutex // guards lost only, so the watchdog never waits behind a slow heartbeat
	lost   error
	// failed is set while the last renewal could not reach the database, and behind once the one
	// after it could not either: a single lost connection is retried at once, but a database that
	// stays away holds the kind's claims back (behind counts in k.behind; see producer.go).
	failed atomic.Bool
	behind atomic.Bool
	stop   chan struct{}
	done   chan struct{}
}

func newRunning(k *kindRunner, c *claimed, lock *execlock.Lock, cancel context.CancelCauseFunc) *running {
	r := &running{k: k, id: c.id, token: c.token, lock: lock, cancel: cancel, stop: make(chan struct{}), done: make(chan struct{})}
	r.deadline = r.until(c.claimedAt)
	r.watchdog = time.AfterFunc(time.Until(r.deadline), r.expired)
	return r
}

// until is when the lease runs out after a renewal sent at sent, by the local clock: the row's lease
// was set from the database's clock after sent, and the lock's validity is what redsync computed.
func (r *running) until(sent time.Time) time.Time {
	deadline := sent.Add(r.k.sh.cfg.LeaseTTL)
	if r.lock != nil && r.lock.Until().Before(deadline) {
		deadline = r.lock.Until()
	}
	return deadline
}

func (r *running) expired() { r.lose(errors.New("the lease ran out before a heartbeat renewed it")) }

// lose records the first cause of losing the lease and cancels the job with it.
func (r *running) lose(cause error) error {
	r.lostMu.Lock()
	defer r.lostMu.Unlock()
	if r.lost == nil {
		r.lost = fmt.Errorf("%w: %w", ErrLeaseLost, cause)
		r.cancel(r.lost)
		r.setBehind(false) // nothing left to renew
	}
	return r.lost
}

// setBehind records whether the lease's renewal waits for the database.
func (r *running) setBehind(behind bool) {
	if !r.behind.CompareAndSwap(!behind, behind) {
		return
	}
	if behind {
		r.k.behind.Add(1)
	} else {
		r.k.behind.Add(-1)
		r.k.signal() // claims may resume
	}
}

func (r *running) lostErr() error {
	r.lostMu.Lock()
	defer r.lostMu.Unlock()
	return r.lost
}

// heartbeat renews the row's lease and the execution lock.
func (r *running) heartbeat(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.lostErr(); err != nil {
		return err
	}
	if r.ended {
		return errAttemptEnded
	}
	// A renewal that ends after the lease has run out renews nothing: bound it by the lease.
	ctx, cancel := context.WithDeadline(ctx, r.deadline)
	defer cancel()
	sent := time.Now()
	var id int64
	err := r.k.sh.db.QueryRow(ctx, r.k.sql.extend, r.id, r.token, r.k.leaseSeconds()).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return r.lose(errors.New("the row's token changed: the job was taken back"))
	case err != nil:
		// The database did not answer: the lease may still hold, and the watchdog decides.
		r.k.sh.noteReach(err)
		if unreachable(err) && r.failed.Swap(true) {
			r.setBehind(true)
		}
		return fmt.Errorf("dispatcher: renewing the lease of %s job %d: %w", r.k.info.Name, r.id, err)
	}
	r.failed.Store(false)
	r.setBehind(false)
	if r.lock != nil {
		if err := r.lock.Extend(ctx); err != nil {
			return r.lose(err)
		}
	}
	r.deadline = r.until(sent)
	r.watchdog.Reset(time.Until(r.deadline))
	return nil
}

// beat runs the automatic heartbeats until stopped. After a renewal that could not reach the
// database it tries again within a second rather than a HeartbeatInterval, so that the lease is
// renewed soon after the database is back, before the kind claims again (see reach.go).
func (r *running) beat() {
	defer close(r.done)
	every := r.k.sh.cfg.HeartbeatInterval
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			wasBehind := r.failed.Load()
			ctx, cancel := context.WithTimeout(context.Background(), every)
			err := r.heartbeat(ctx)
			cancel()
			if errors.Is(err, ErrLeaseLost) {
				r.setBehind(false)
				return
			}
			if err != nil {
				level := slog.LevelWarn
				if wasBehind {
					level = slog.LevelDebug // warned at the first failure already
				}
				r.k.sh.logger.Log(context.Background(), level, "dispatcher: heartbeat failed", "kind", r.k.info.Name, "id", r.id, "err", err)
			}
			if r.failed.Load() {
				t.Reset(min(every, time.Second))
			} else {
				t.Reset(every)
			}
		}
	}
}

// commitOutcome writes the attempt's outcome in tx and commits it, with the heartbeats held off from
// the finish on: a renewal would wait for the finish's row lock, and once the commit is through it
// would find the row finished and take that for a lost lease. The finish is fenced like any other,
// and refused once the lease is lost, so tx's other writes commit only with a valid claim.
func (r *running) commitOutcome(ctx context.Context, tx pgx.Tx, req finishReq) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	held, err := r.k.runFinish(ctx, tx, []finishReq{req})
	switch {
	case err != nil:
		return err
	case !held.ok[req.id]:
		return fmt.Errorf("%w: the row's token changed before the transaction committed", ErrLeaseLost)
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	r.ended = true
	return nil
}

// errAttemptEnded is what Job.Heartbeat returns once the attempt's outcome is decided: from a
// handler the worker stopped waiting for, or from a goroutine the handler left behind.
var errAttemptEnded = fmt.Errorf("%w: the attempt has ended and its outcome is recorded", ErrLeaseLost)

// finish stops the heartbeats, explicit ones too, and reports whether the lease was lost.
func (r *running) finish() error {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	r.watchdog.Stop()
	r.ended = true
	r.setBehind(false)
	r.mu.Unlock()
	return r.lostErr()
}
