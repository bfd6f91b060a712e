package dispatcher

import (
	"errors"
	"time"

	"github.com/jobpipe/jobpipe/execlock"
)

// Observer receives what a dispatcher does with each kind's jobs, for metrics (package metrics
// implements it for Prometheus). Set it as Config.Observer; one Observer may serve several
// dispatchers.
//
// Kind is called once per kind, when the kind is registered, and the KindObserver it returns is kept:
// the job's path then calls it without looking anything up. Its methods are called from many
// goroutines at once, on the job's path: they must be safe for concurrent use, quick, and never
// block. Kind may return nil (an untyped nil) to observe nothing of a kind.
type Observer interface {
	Kind(name string) KindObserver
	// LockNodes is called by a dispatcher that watches its Redis lock nodes (one with a keyed kind
	// registered) with how many of them answered PING (up) and how many it has (total): when it
	// starts, and whenever the number answering changes. The nodes are pinged every few seconds, every
	// second while a kind's lock calls fail. When the dispatcher stops it is called once more with
	// up and total 0: the dispatcher no longer watches them. dispatcher is its Config.NodeName.
	LockNodes(dispatcher string, up, total int)
}

// KindObserver receives the events of one kind's jobs in one dispatcher.
type KindObserver interface {
	// JobStarted is called when a claimed job is handed to a worker. lag is how late it starts: the
	// claim's time minus the time the job was due (process_after, else created_at), both read on the
	// database's clock.
	JobStarted(lag time.Duration)
	// JobFinished is called once per claimed job, when its attempt has ended and its outcome has been
	// written (or found stale). ran is how long the handler ran, 0 for a job that never ran.
	JobFinished(o Outcome, ran time.Duration)
	// LockAttempts is called after Redis lock calls for the kind's jobs (queue and execution locks):
	// n attempts ended with result r. The counts are those of execlock.Stats, per kind.
	LockAttempts(r LockResult, n int)
	// Rescued is called when this dispatcher, as the kind's rescuer, took back n jobs whose lease had
	// expired.
	Rescued(n int)
	// LockWait is called with true when the kind's lock calls have kept failing for want of a quorum
	// of Redis lock nodes, so that its keyed jobs wait (the dispatcher logs a WARN then), and with
	// false when they no longer do, or when the dispatcher stops: calls alternate, starting with true.
	LockWait(waiting bool)
}

// Outcome is how one attempt of a job ended, as an Observer sees it. The set is fixed, so metrics
// labelled with it stay bounded.
type Outcome uint8

// The outcomes. A lost lease, and a finish the row no longer accepted, take precedence over what the
// handler returned, since what it returned was not recorded as done.
const (
	// OutcomeProcessed: the handler succeeded and the job is processed.
	OutcomeProcessed Outcome = iota
	// OutcomeRetried: the attempt failed (or was interrupted by Stop) and the job waits to run again.
	OutcomeRetried
	// OutcomeFailed: the attempt failed with no attempts left, or the job's data did not decode.
	OutcomeFailed
	// OutcomeDiscarded: the handler returned Discard; the job failed without retries.
	OutcomeDiscarded
	// OutcomeSnoozed: the handler returned Snooze; the job waits without the attempt counting.
	OutcomeSnoozed
	// OutcomeRunAgain: the handler returned RunAgain; the job is processed and its next run enqueued.
	OutcomeRunAgain
	// OutcomeReleased: the job never ran (its execution lock was held elsewhere) and was given back.
	OutcomeReleased
	// OutcomeLeaseLost: the job's lease or execution lock was lost while it ran, and the row was still
	// this attempt's when its outcome was written: the attempt is not recorded as done, and the job
	// waits to run again (or failed, with no attempts left).
	OutcomeLeaseLost
	// OutcomeStale: the outcome was not recorded because the row had moved on (its token changed, for
	// example after a rescue), whether or not the attempt had noticed that it lost its lease.
	OutcomeStale
	// OutcomeTimedOut: the job ran past its kind's timeout and its handler returned an error, or did
	// not return within Config.HandlerGrace; the job waits to run again, or failed when no attempts
	// were left.
	OutcomeTimedOut
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"processed", "retried", "failed", "discarded", "snoozed", "run_again",
	"released", "lease_lost", "stale", "timed_out"}

// String returns the outcome's name as metrics label it: processed, retried, failed, discarded,
// snoozed, run_again, released, lease_lost, stale, timed_out.
func (o Outcome) String() string { return nameOf(outcomeNames[:], o) }

// Outcomes returns every Outcome, in order.
func Outcomes() []Outcome { return every(numOutcomes) }

// LockResult is how one Redis lock attempt ended, as execlock.Stats counts it.
type LockResult uint8

// The lock results.
const (
	// LockAcquired: the attempt got its lock.
	LockAcquired LockResult = iota
	// LockTaken: another holder had the lock (contention).
	LockTaken
	// LockUnavailable: a quorum of lock nodes did not answer in time.
	LockUnavailable
	numLockResults
)

var lockResultNames = [numLockResults]string{"acquired", "taken", "unavailable"}

// String returns the result's name as metrics label it: acquired, taken, unavailable.
func (r LockResult) String() string { return nameOf(lockResultNames[:], r) }

// LockResults returns every LockResult, in order.
func LockResults() []LockResult { return every(numLockResults) }

// KeyRunObserver is a KindObserver that also counts key runs: a dispatcher calls KeyRunEnded on the
// KindObserver of a keyed kind that implements it, once per run (see Config.KeyRunJobs), with why it
// ended and how many jobs it ran. The rules of KindObserver's methods apply.
type KeyRunObserver interface {
	KeyRunEnded(why RunEnd, jobs int)
}

// PauseObserver is a KindObserver that also counts the claim passes of a keyed kind that went on
// without pausing the dispatcher's finish statements, as those under way did not end in time (see
// Stats.PausesMissed): a dispatcher calls PauseMissed once per such pass. The rules of KindObserver's
// methods apply.
type PauseObserver interface {
	PauseMissed()
}

// RunEnd is why a key run ended and gave its key back, as a KeyRunObserver sees it. The set is
// fixed, so metrics labelled with it stay bounded.
type RunEnd uint8

// The ends of a key run.
const (
	// RunEndNoNext: the key had no job the run could take next. None waited, or the database claimed
	// none: none was due yet, the key's or the kind's limit was lowered or reached, the kind or the key
	// was paused, or a claim pass held it.
	RunEndNoNext RunEnd = iota
	// RunEndBudget: the run used its fairness budget, Config.KeyRunJobs or KeyRunTime.
	RunEndBudget
	// RunEndOutcome: its last job waits to run again (retried, snoozed, run again or given back), and
	// the key's later jobs wait behind it; or the outcome committed in the handler's transaction, as
	// for every job of a RegisterTx kind.
	RunEndOutcome
	// RunEndLost: the job's lease or the run's execution lock was lost, its outcome was not recorded
	// (its row had moved on, or the database refused the write), or the lock could not be renewed
	// before the next job.
	RunEndLost
	// RunEndAbandoned: the worker stopped waiting for a handler that outlived its context by
	// Config.HandlerGrace.
	RunEndAbandoned
	// RunEndStopped: the dispatcher began to stop.
	RunEndStopped
	numRunEnds
)

var runEndNames = [numRunEnds]string{"no_next", "budget", "outcome", "lost", "abandoned", "stopped"}

// String returns the end's name as metrics label it: no_next, budget, outcome, lost, abandoned,
// stopped.
func (r RunEnd) String() string { return nameOf(runEndNames[:], r) }

// RunEnds returns every RunEnd, in order.
func RunEnds() []RunEnd { return every(numRunEnds) }

// every returns the n values of one of the enums above, in order.
func every[E ~uint8](n E) []E {
	all := make([]E, n)
	for i := range all {
		all[i] = E(i)
	}
	return all
}

// nameOf returns e's name, "unknown" for a value past the enum's last.
func nameOf[E ~uint8](names []string, e E) string {
	if int(e) >= len(names) {
		return "unknown"
	}
	return names[e]
}

// Everything below runs only when the kind has an observer: without one, each call site costs a nil
// check.

// observeStart reports a claimed job handed to its worker.
func (k *kindRunner) observeStart(c *claimed) {
	if k.obs == nil {
		return
	}
	due := c.createdAt
	if c.processAfter != nil {
		due = *c.processAfter
	}
	k.obs.JobStarted(max(c.startedAt.Sub(due), 0))
}

// ended counts the end of an attempt in Stats and reports it to the observer, as one Outcome: out is
// what was written, held whether the row accepted it, err what the handler returned, lost why the
// lease was lost (nil if it was not) and ran how long the handler ran.
func (k *kindRunner) ended(out rowWrite, held bool, err, lost error, ran time.Duration) {
	o := observed(out, held, err, lost)
	k.sh.stats.ended[o].Add(1)
	if k.obs != nil {
		k.obs.JobFinished(o, ran)
	}
}

// runEnded counts the end of a key run in Stats and reports it to the observer, if it counts runs.
func (k *kindRunner) runEnded(run *keyRun) {
	k.sh.stats.runsEnded[run.ended].Add(1)
	if k.runObs != nil {
		k.runObs.KeyRunEnded(run.ended, run.jobs)
	}
}

// clock returns the time now when the kind is observed, so that an unobserved kind does not read
// the clock on the job's path.
func (k *kindRunner) clock() time.Time {
	if k.obs == nil {
		return time.Time{}
	}
	return time.Now()
}

// elapsed is the time since started, 0 when started is zero (see clock).
func elapsed(started time.Time) time.Duration {
	if started.IsZero() {
		return 0
	}
	return time.Since(started)
}

// observed is the Outcome of an attempt whose finish wrote out: the one place where the two meet.
func observed(out rowWrite, held bool, err, lost error) Outcome {
	var discard *DiscardError
	switch {
	case !held:
		return OutcomeStale
	case lost != nil:
		return OutcomeLeaseLost
	case (out == writeRetry || out == writeFailed) && errors.Is(err, ErrTimeout):
		return OutcomeTimedOut
	case out == writeFailed && errors.As(err, &discard):
		return OutcomeDiscarded
	}
	return [...]Outcome{writeProcessed: OutcomeProcessed, writeRetry: OutcomeRetried, writeFailed: OutcomeFailed,
		writeSnooze: OutcomeSnoozed, writeRunAgain: OutcomeRunAgain, writeRelease: OutcomeReleased}[out]
}

// observeLock reports one lock attempt (TryQueue, TryExec), to the kind's lock watch (lockCalled)
// and its observer. Attempts ended by their context or by invalid arguments are not counted, as in
// execlock.Stats.
func (k *kindRunner) observeLock(err error) {
	k.lockCalled(err)
	if k.obs == nil {
		return
	}
	if r, ok := lockResult(err); ok {
		k.obs.LockAttempts(r, 1)
	}
}

// observeSlotLock reports a TryQueueSlot call over slots 0 to limit-1 but skip: one attempt per slot
// found taken, then the one that ended the search. When a quorum stopped answering mid-search, the
// slots found taken before are not known, and only the failure is counted.
func (k *kindRunner) observeSlotLock(lock *execlock.Lock, err error, limit int, skip []int) {
	k.lockCalled(err)
	if k.obs == nil {
		return
	}
	r, ok := lockResult(err)
	switch {
	case !ok:
	case r == LockAcquired:
		if n := lock.FailedAttempts(); n > 0 {
			k.obs.LockAttempts(LockTaken, n)
		}
		k.obs.LockAttempts(LockAcquired, 1)
	case r == LockTaken:
		if n := freeSlots(limit, skip); n > 0 {
			k.obs.LockAttempts(LockTaken, n)
		}
	default:
		k.obs.LockAttempts(r, 1)
	}
}

func lockResult(err error) (LockResult, bool) {
	switch {
	case err == nil:
		return LockAcquired, true
	case errors.Is(err, execlock.ErrTaken):
		return LockTaken, true
	case errors.Is(err, execlock.ErrUnavailable):
		return LockUnavailable, true
	}
	return 0, false
}

// freeSlots counts the slots below limit that skip does not list: those a slot search tries.
func freeSlots(limit int, skip []int) int {
	limit = min(limit, execlock.MaxLimit)
	if limit <= 0 {
		return 0
	}
	skipped := make([]bool, limit)
	n := limit
	for _, s := range skip {
		if s >= 0 && s < limit && !skipped[s] {
			skipped[s] = true
			n--
		}
	}
	return n
}

// observeLockWait reports that the kind's keyed jobs wait for a quorum of lock nodes, or no longer do.
func (k *kindRunner) observeLockWait(waiting bool) {
	if k.obs != nil {
		k.obs.LockWait(waiting)
	}
}

// observeLockNodes reports how many lock nodes answer; -1 when the dispatcher stops watching them.
func (d *shared) observeLockNodes(up int) {
	if d.cfg.Observer == nil {
		return
	}
	if up < 0 {
		d.cfg.Observer.LockNodes(d.cfg.NodeName, 0, 0)
		return
	}
	d.cfg.Observer.LockNodes(d.cfg.NodeName, up, len(d.cfg.Redis))
}

// observeRescued reports jobs the kind's rescuer took back.
func (k *kindRunner) observeRescued(n int) {
	if k.obs != nil && n > 0 {
		k.obs.Rescued(n)
	}
}

// kindObserver returns the observer of the kind named name, nil when none is configured.
func (d *Dispatcher) kindObserver(name string) KindObserver {
	if d.cfg.Observer == nil {
		return nil
	}
	return d.cfg.Observer.Kind(name)
}
