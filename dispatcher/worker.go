package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/jobpipe/jobpipe/execlock"
)

// releaseDelay is how long a job given back unrun waits before it may be claimed again.
const releaseDelay = time.Second

// work runs one claimed job to its recorded outcome and, for a keyed kind, the key run it starts: the
// key's next jobs, claimed one at a time as each finishes, under the same execution lock (see
// runEnds). It owns its place in the kind's capacity until the last handler has returned, and each job until its
// outcome is written (Stop waits for that); a handler that outlives its context by HandlerGrace hands
// both to abandon (see timeout.go), which ends the run.
func (k *kindRunner) work(c *claimed) {
	abandoned := false
	defer func() {
		if abandoned {
			return // abandon did all this when it stopped waiting for the handler
		}
		k.releasePlace(c)           // if no outcome was written: a RegisterTx success
		k.capacity.outcomeWritten() // the bound on outcomes being written has room again (see producer.run)
		k.sh.workers.Done()
	}()
	k.observeStart(c)
	if c.decodeErr != nil {
		k.releaseQueueLock(c)
		k.releasePlace(c)
		held := k.finishOne(c, writeFailed, fmt.Sprintf("the job's data does not decode into its Go type: %v", c.decodeErr), 0)
		k.ended(writeFailed, held, nil, nil, 0)
		return
	}
	var lock *execlock.Lock
	if k.keyed {
		var err error
		if lock, err = k.execLock(c); err != nil {
			k.releaseQueueLock(c)
			// Someone still holds the slot's lock (a stalled worker whose row was taken back): give the
			// claim back, and let the job wait a moment rather than be claimed again at once.
			k.sh.logger.Info("dispatcher: no execution lock; the job goes back to wait", "kind", k.info.Name, "id", c.id, "err", err)
			k.releasePlace(c)
			held := k.finishOne(c, writeRelease, "", releaseDelay)
			k.ended(writeRelease, held, nil, nil, 0)
			return
		}
		// The execution lock guards the job from here: the queue lock goes while the handler runs,
		// not before it (a round trip to every node that only the key's next claim waits for).
		k.sh.workers.Add(1) // Stop waits for it, like for the job
		go func(first *claimed) {
			defer k.sh.workers.Done()
			k.releaseQueueLock(first)
		}(c)
	}
	run := keyRun{began: time.Now()}
	for c != nil {
		var next *claimed
		next, abandoned = k.runOne(c, lock, &run)
		if abandoned || next == nil {
			if k.keyed {
				if abandoned {
					run.ended = RunEndAbandoned
				}
				k.runEnded(&run)
			}
			return
		}
		// The run goes on: the next job takes over c's place in the kind's capacity.
		c.slotFreed, c = true, next
		k.claimedByRun(c)
	}
}

// claimedByRun counts and observes a job a key run claimed, as claimAndStart does the jobs of a claim.
func (k *kindRunner) claimedByRun(c *claimed) {
	k.sh.stats.claimed.Add(1)
	k.sh.stats.runClaimed.Add(1)
	k.observeStart(c)
}

// execLock takes the execution lock of c's slot. A lock found taken is tried again for a few
// milliseconds: the key's previous run may have ended just now, giving its lock back in the round
// trip after the finish that freed the slot, and a claim given back waits releaseDelay.
func (k *kindRunner) execLock(c *claimed) (*execlock.Lock, error) {
	wait := execLockRetryFirst
	for try := 1; ; try++ {
		lock, err := k.sh.locker.TryExec(k.sh.jobsCtx, k.info.Name, c.key, c.slot)
		k.observeLock(err)
		if !errors.Is(err, execlock.ErrTaken) || try == execLockTries {
			return lock, err
		}
		select {
		case <-time.After(wait):
		case <-k.sh.jobsCtx.Done():
			return nil, err
		}
		wait *= 2
	}
}

// execLockTries and execLockRetryFirst bound execLock's retries of a taken lock: 3 tries within 15 ms.
const (
	execLockTries      = 3
	execLockRetryFirst = 5 * time.Millisecond
)

// keyRun is what a key run has done so far, for its fairness budget (Config.KeyRunJobs, KeyRunTime),
// and, once it has ended, why.
type keyRun struct {
	began time.Time
	jobs  int
	ended RunEnd
}

// runOne runs c's handler and records its outcome. For a keyed kind whose run may go on (see
// runEnds) the finish also claims the key's next job, which it returns; it gives the execution
// lock back once the run ends. abandoned reports that the worker stopped waiting for the handler.
func (k *kindRunner) runOne(c *claimed, lock *execlock.Lock, run *keyRun) (next *claimed, abandoned bool) {
	run.jobs++
	if c.decodeErr != nil {
		// A job of the run that does not decode fails without running, and the run goes on.
		return k.endJob(c, lock, run, jobEnd{out: writeFailed, errText: fmt.Sprintf("the job's data does not decode into its Go type: %v", c.decodeErr)}), false
	}
	ctx, cancel := context.WithCancelCause(k.sh.jobsCtx)
	defer cancel(nil)
	r := newRunning(k, c, lock, cancel)
	ctx, a := k.bound(ctx, c, r, lock) // the kind's timeout, and the grace after it (see timeout.go)
	go r.beat()
	started := k.clock()
	recorded, err := k.call(ctx, c, r)
	if !a.returned() {
		return nil, true // the worker stopped waiting for this handler and recorded its outcome without it
	}
	err = k.timedOut(ctx, c, err)
	ran := elapsed(started)
	lost := r.finish()
	if recorded {
		// Committed in the handler's transaction, before any loss of the lease could matter.
		run.ended = RunEndOutcome
		k.releaseExecLock(lock)
		out, _, _ := committedOutcome(err)
		k.ended(out, true, err, nil, ran)
		return nil, false
	}
	out, errText, delay := k.decide(c, err, lost, context.Cause(ctx))
	return k.endJob(c, lock, run, jobEnd{out: out, errText: errText, delay: delay, err: err, lost: lost, ran: ran}), false
}

// jobEnd is how a job's attempt ended: the outcome to record, and what the observer is told.
type jobEnd struct {
	out     rowWrite
	errText string
	delay   time.Duration
	err     error // the handler's
	lost    error
	ran     time.Duration
}

// endJob records c's outcome and, when the run goes on, claims the key's next job in the same
// statement and returns it; it gives the execution lock back once the run ends.
func (k *kindRunner) endJob(c *claimed, lock *execlock.Lock, run *keyRun, e jobEnd) *claimed {
	out, errText, delay, err, lost, ran := e.out, e.errText, e.delay, e.err, e.lost, e.ran
	if why, ends := k.runEnds(c, run, out, lost); ends {
		run.ended = why
		k.releasePlace(c)
		// Before the outcome is written: the row still holds the slot, so the database keeps the key's
		// next job from being claimed until the finish commits, and by then its lock is free. Released
		// after, the next job's worker could find the lock still held and have to give its claim back.
		k.releaseExecLock(lock)
		held := k.finishOne(c, out, errText, delay)
		k.ended(out, held, err, lost, ran)
		if !held {
			run.ended = RunEndLost
		}
		return nil
	}
	stopKeeping := k.keepLock(lock)
	held, next := k.finishAndContinue(c, out, errText, delay, c.slot)
	stopKeeping()
	k.ended(out, held, err, lost, ran)
	switch {
	case !held:
		run.ended = RunEndLost
	case next == nil:
		run.ended = RunEndNoNext
	case !k.lockFor(next, lock):
		// Stop began while the next job was claimed, or the run's lock is lost: it goes back to wait,
		// unrun.
		run.ended = RunEndLost
		if k.sh.jobsCtx.Err() != nil {
			run.ended = RunEndStopped
		}
		k.claimedByRun(next)
		k.ended(writeRelease, k.finishOne(next, writeRelease, "", 0), nil, nil, 0)
		next = nil
	}
	if next == nil {
		k.releaseExecLock(lock)
	}
	return next
}

// keepLock renews a key run's lock while the finish that may continue the run waits for the
// database, every half HeartbeatInterval, and returns the function that stops it. No job's heartbeat
// runs then, and a finish held up by a loaded database would otherwise outlast the lock, ending the
// run and giving its next job back. Most finishes end before the first renewal, and cost only a timer.
func (k *kindRunner) keepLock(lock *execlock.Lock) (stop func()) {
	every := k.sh.cfg.HeartbeatInterval / 2
	var mu sync.Mutex // guards t and stopped
	var t *time.Timer
	stopped := false
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(every, func() {
		ctx, cancel := context.WithTimeout(k.sh.jobsCtx, k.sh.cfg.HeartbeatInterval)
		err := lock.Extend(ctx) // on failure lockFor finds out, and the run ends
		cancel()
		mu.Lock()
		defer mu.Unlock()
		if err == nil && !stopped {
			t.Reset(every)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// lockFor reports whether the run may start next under lock: not once Stop has begun, and not with
// a lock that could run out before next's heartbeats or the finish after it renew it (a job shorter
// than a HeartbeatInterval renews nothing), unless an extension succeeds.
func (k *kindRunner) lockFor(next *claimed, lock *execlock.Lock) bool {
	if k.sh.jobsCtx.Err() != nil {
		return false
	}
	if time.Until(lock.Until()) > 2*k.sh.cfg.HeartbeatInterval {
		return true
	}
	ctx, cancel := context.WithTimeout(k.sh.jobsCtx, k.sh.cfg.HeartbeatInterval)
	defer cancel()
	if err := lock.Extend(ctx); err != nil {
		k.sh.logger.Info("dispatcher: a key run's lock could not be renewed; the run ends", "kind", k.info.Name, "next", next.id, "err", err)
		return false
	}
	return true
}

// runEnds reports whether the key run whose job c ends with out ends with it, and why; when it does
// not, the finish claims the key's next job with that outcome. The database has the last word on the
// key's and the kind's limits (see finishRunSQL); this decides what only the worker knows. The run
// ends when the lease or the lock was lost; at Stop; when its job goes back to wait (a retry, a
// snooze, a new run), as the key's later jobs wait behind it; for a RegisterTx kind, whose outcome
// commits in the handler's transaction; when no job of the key waited after c when c was claimed, so
// that the finish need not look for one and may share its statement with other outcomes (a job
// enqueued since starts through a claim pass, which the finish wakes); and at its fairness budget, so
// that other keys get their turn at this dispatcher's workers. A kind without a key has no runs.
func (k *kindRunner) runEnds(c *claimed, run *keyRun, out rowWrite, lost error) (why RunEnd, ends bool) {
	switch {
	case !k.keyed:
		return RunEndNoNext, true
	case lost != nil:
		return RunEndLost, true
	case k.sh.jobsCtx.Err() != nil:
		return RunEndStopped, true
	case k.txMode || (out != writeProcessed && out != writeFailed):
		return RunEndOutcome, true
	case c.lastOfKey:
		return RunEndNoNext, true
	case run.jobs >= k.sh.cfg.KeyRunJobs || time.Since(run.began) >= k.sh.cfg.KeyRunTime:
		return RunEndBudget, true
	}
	return 0, false
}

func (k *kindRunner) releaseExecLock(lock *execlock.Lock) {
	if lock != nil {
		_ = lock.Release(context.Background())
	}
}

// releasePlace gives c's place in the kind's capacity back, once: when its handler has returned, before the outcome is
// written. The write is batched with others and waits for a commit; holding the slot through it would
// leave the slot idle for that wait, and with fast handlers most slots would be waiting on commits
// rather than running jobs. A total limit or a key's slots are not freed by this: the row holds its
// lease until the outcome commits, and claims count rows.
func (k *kindRunner) releasePlace(c *claimed) {
	if c.slotFreed {
		return
	}
	c.slotFreed = true
	k.capacity.handlerReturned()
}

func (k *kindRunner) releaseQueueLock(c *claimed) {
	if c.queueLock != nil {
		_ = c.queueLock.Release(context.Background())
		c.queueLock = nil
	}
}

// call runs the handler, turning a panic into an error. For a RegisterTx kind, recorded reports that
// the job's outcome was committed in the handler's transaction (see callTx).
func (k *kindRunner) call(ctx context.Context, c *claimed, r *running) (recorded bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			recorded, err = false, fmt.Errorf("dispatcher: the handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	if !k.txMode {
		return false, k.handle(ctx, nil, c, r)
	}
	return k.callTx(ctx, c, r)
}

// callTx runs a TxHandler in a transaction from Config.DB. Outcomes that end the attempt well
// (success, Snooze, RunAgain) are written in that transaction, so the handler's writes commit with
// them or not at all; an error or Discard rolls the handler's writes back, and the outcome is then
// written by the finisher like any other kind's.
func (k *kindRunner) callTx(ctx context.Context, c *claimed, r *running) (recorded bool, err error) {
	if err := k.sh.txConns.acquire(ctx); err != nil {
		return false, err
	}
	defer k.sh.txConns.release()
	tx, err := k.sh.cfg.DB.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // a no-op once committed
	handlerErr := k.handle(ctx, tx, c, r)
	out, delay, ok := committedOutcome(handlerErr)
	if !ok {
		return false, handlerErr
	}
	if err := r.commitOutcome(ctx, tx, finishReq{id: c.id, token: c.token, out: out, delay: delay}); err != nil {
		return false, err
	}
	return true, handlerErr
}

// committedOutcome maps what a TxHandler returned to the outcome committed with its transaction; ok
// is false for the results whose writes are rolled back (an error, Discard).
func committedOutcome(err error) (out rowWrite, delay time.Duration, ok bool) {
	out, _, delay, ok = asked(err)
	return out, delay, ok && out != writeFailed
}

// asked maps the results a handler steers its job with (nil, Snooze, Discard, RunAgain) to their
// outcome; ok is false for any other error.
func asked(err error) (out rowWrite, errText string, delay time.Duration, ok bool) {
	var snooze *SnoozeError
	var discard *DiscardError
	var again *RunAgainError
	switch {
	case err == nil:
		return writeProcessed, "", 0, true
	case errors.As(err, &snooze):
		return writeSnooze, "", snooze.Delay, true
	case errors.As(err, &discard):
		return writeFailed, discard.Error(), 0, true
	case errors.As(err, &again):
		return writeRunAgain, "", again.Delay, true
	}
	return 0, "", 0, false
}

// decide turns the handler's result into the outcome to record.
func (k *kindRunner) decide(c *claimed, err, lost, cause error) (out rowWrite, errText string, delay time.Duration) {
	if lost != nil {
		// Not done, whatever the handler returned: the job may be running elsewhere already. If the
		// fence still holds, the row goes back to retry; if not, the finish changes nothing.
		return k.retry(c, lost)
	}
	if out, errText, delay, ok := asked(err); ok {
		return out, errText, delay
	}
	if errors.Is(cause, ErrShutdown) {
		// Interrupted, not failed: back to wait at once. The attempt stays counted (it started).
		return writeRetry, fmt.Sprintf("%v: %v", ErrShutdown, err), 0
	}
	return k.retry(c, err)
}

func (k *kindRunner) retry(c *claimed, err error) (rowWrite, string, time.Duration) {
	if c.attempt >= k.info.MaxAttempts {
		return writeFailed, err.Error(), 0
	}
	return writeRetry, err.Error(), k.info.Backoff.Delay(c.attempt)
}
