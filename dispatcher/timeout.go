package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jobpipe/jobpipe/execlock"
)

// A handler's run is bounded twice. Its context gets the kind's timeout as a deadline (jobinfo.Timeout),
// and once that context has ended for any reason (the timeout, a lost lease, Stop's deadline) the
// handler has Config.HandlerGrace to return. Past that the worker stops waiting: abandon records the
// attempt and frees what the job held, and the handler's goroutine runs on until it returns, with
// nothing left for it to change. Neither costs a goroutine per job: the deadline is the context's own
// timer, and the watch is a callback registered on the context, which starts a timer only once the
// context has ended.

// The states of an attempt's handler: the worker and abandon race to move it out of running, and
// whoever wins records the outcome.
const (
	handlerRunning int32 = iota
	handlerReturned
	handlerAbandoned
)

// attempt is what abandon needs of one running job.
type attempt struct {
	k       *kindRunner
	c       *claimed
	r       *running
	lock    *execlock.Lock
	ctx     context.Context
	started time.Time // see kindRunner.clock

	state       atomic.Int32
	stopWatch   func() bool        // unregisters the watch on ctx
	stopTimeout context.CancelFunc // nil without a timeout
}

// bound gives the handler's context the kind's timeout, and watches it: a handler still running
// HandlerGrace after that context ended is abandoned. The worker must call returned once the handler
// has returned.
func (k *kindRunner) bound(ctx context.Context, c *claimed, r *running, lock *execlock.Lock) (context.Context, *attempt) {
	a := &attempt{k: k, c: c, r: r, lock: lock, started: k.clock()}
	if k.timeout > 0 {
		ctx, a.stopTimeout = context.WithTimeoutCause(ctx, k.timeout, k.timeoutCause)
	}
	a.ctx = ctx
	a.stopWatch = context.AfterFunc(ctx, func() { time.AfterFunc(k.sh.cfg.HandlerGrace, a.abandon) })
	return ctx, a
}

// returned reports whether the worker still owns the attempt now that its handler has returned: false
// when the attempt was abandoned, whose outcome is recorded already.
func (a *attempt) returned() bool {
	if !a.state.CompareAndSwap(handlerRunning, handlerReturned) {
		return false
	}
	a.stopWatch() // before the timeout's cancel, which would set it off
	if a.stopTimeout != nil {
		a.stopTimeout()
	}
	return true
}

// abandon gives up waiting for a handler that has not returned HandlerGrace after its context ended.
// It does what the worker does after a handler's error: stops the heartbeats, frees the job's slot in
// this dispatcher, releases the execution lock, and records a retry (fenced by the token, so the late
// handler's own finish, or a TxHandler's completion, changes nothing: its transaction rolls back).
// Stop waits for this, not for the handler.
func (a *attempt) abandon() {
	if !a.state.CompareAndSwap(handlerRunning, handlerAbandoned) {
		return // the handler returned meanwhile
	}
	k, c := a.k, a.c
	cause := context.Cause(a.ctx)
	grace := k.sh.cfg.HandlerGrace
	k.sh.stats.abandoned.Add(1)
	k.sh.logger.Warn("dispatcher: the handler did not return after its context ended; the worker stopped waiting for it and its goroutine runs on",
		"kind", k.info.Name, "id", c.id, "attempt", c.attempt, "cause", cause, "grace", grace)
	// decide names a shutdown or a lost lease itself; a timeout is named here, as timedOut does.
	err := fmt.Errorf("the handler did not return within %v and was abandoned", grace)
	if errors.Is(cause, ErrTimeout) {
		err = fmt.Errorf("%w: %w", cause, err)
	}
	lost := a.r.finish()
	k.releasePlace(c)
	if a.lock != nil {
		_ = a.lock.Release(context.Background())
	}
	out, errText, delay := k.decide(c, err, lost, cause)
	held := k.finishOne(c, out, errText, delay)
	k.ended(out, held, err, lost, elapsed(a.started))
	k.capacity.outcomeWritten() // what work's deferred clean-up does for a handler that returned
	k.sh.workers.Done()
}

// timedOut makes the error a handler returned after its timeout passed say so, and logs it; the
// attempt's Outcome is then OutcomeTimedOut (see observed). Other errors, and the outcomes a handler
// asks for (Snooze, Discard, RunAgain), are left as they are: a handler that returns nil after its
// deadline has done its work.
func (k *kindRunner) timedOut(ctx context.Context, c *claimed, err error) error {
	cause := context.Cause(ctx)
	if _, _, _, steered := asked(err); steered || !errors.Is(cause, ErrTimeout) {
		return err
	}
	if !errors.Is(err, ErrTimeout) { // not the cause itself, returned as it was
		err = fmt.Errorf("%w: %w", cause, err)
	}
	k.sh.logger.Warn("dispatcher: the job ran past its timeout", "kind", k.info.Name, "id", c.id,
		"attempt", c.attempt, "timeout", k.timeout, "err", err)
	return err
}
