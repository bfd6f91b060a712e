package execlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
)

// Sentinel errors; messages start with "execlock: ". An error of this package wraps one of them or
// the caller's context error; an extension that nodes did not answer wraps ErrLost and ErrUnavailable.
var (
	// ErrTaken means another holder has the lock on a quorum of nodes: normal contention. The
	// error also wraps redsync's *redsync.ErrTaken, which lists the nodes.
	ErrTaken = errors.New("execlock: lock taken")
	// ErrUnavailable means a quorum of nodes could not be reached in time (down, stalled or
	// refusing), so the call could not decide. The error also wraps the nodes' errors.
	ErrUnavailable = errors.New("execlock: lock nodes unavailable")
	// ErrLost means a lock is no longer held: its validity ended, another holder has it, or it
	// could not be extended on a quorum. A job whose execution lock is lost must stop.
	ErrLost = errors.New("execlock: lock lost")
	// ErrReleased is returned by Extend on a lock that was already released.
	ErrReleased = errors.New("execlock: lock already released")
	// ErrInvalid means an argument or a Config field is invalid.
	ErrInvalid = errors.New("execlock: invalid")
)

// Lock is one held queue or execution lock. Its methods are safe for concurrent use: a heartbeat
// goroutine may Extend while the worker that finishes the job calls Release.
type Lock struct {
	locker       *Locker
	slot, failed int
	until        atomic.Pointer[time.Time] // with its monotonic clock reading; nil after Release

	mu       sync.Mutex // serialises calls on m: a redsync Mutex is not safe for concurrent use
	m        *redsync.Mutex
	track    lockTrack
	lost     error // set once the lock is known to be lost for good; Extend then returns it
	released bool
}

// Key returns the lock's Redis key.
func (k *Lock) Key() string { return k.m.Name() }

// Value returns the lock's value in Redis: "<Config.NodeName>:<random>".
func (k *Lock) Value() string { return k.m.Value() }

// Slot returns the slot the lock holds.
func (k *Lock) Slot() int { return k.slot }

// FailedAttempts returns how many slots TryExecSlot or TryQueueSlot found taken before this one;
// 0 for a lock from TryExec or TryQueue.
func (k *Lock) FailedAttempts() int { return k.failed }

// Until returns the end of the lock's validity as this process reckons it (the start of the call
// that took or last extended it, plus the TTL, less a 1% clock drift allowance), or the zero time
// after Release. Past it another holder may take the lock; before it too, if nodes restart empty.
func (k *Lock) Until() time.Time {
	if u := k.until.Load(); u != nil {
		return *u
	}
	return time.Time{}
}

// Extend resets the lock's TTL on a quorum of nodes and moves Until forward; it never takes the
// lock again where it lapsed. Its error wraps ErrLost when the lock could not be extended: Until
// passed, or a quorum no longer holds its value (lost for good: every later Extend returns the same
// error), or nodes did not answer (it also wraps ErrUnavailable; a later Extend may succeed). It
// returns ErrReleased after Release, ctx's error when ctx ended, and takes at most CallTimeout.
func (k *Lock) Extend(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := &k.locker.stats
	switch until := k.Until(); {
	case k.released:
		return fmt.Errorf("%w: %s", ErrReleased, k.Key())
	case k.lost != nil:
		return k.lost
	case ctx.Err() != nil:
		return fmt.Errorf("execlock: extend %s: %w", k.Key(), ctx.Err())
	case !time.Now().Before(until):
		st.extendFailed.Add(1)
		k.lost = fmt.Errorf("%w: %s: validity ended at %s", ErrLost, k.Key(), until.Format(time.RFC3339Nano))
		return k.lost
	}
	callCtx, cancel := k.locker.callContext(ctx, k.track, false)
	defer cancel()
	ok, err := k.m.ExtendContext(callCtx)
	if ok {
		st.extended.Add(1)
		k.until.Store(new(k.m.Until()))
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("execlock: extend %s: %w", k.Key(), cerr)
	}
	st.extendFailed.Add(1)
	var taken *redsync.ErrTaken
	switch {
	case errors.As(err, &taken): // a quorum holds another value or none, and Extend never sets a key
		k.lost = fmt.Errorf("%w: %s: not held on %d of %d nodes any more (expired, or taken by another): %w",
			ErrLost, k.Key(), len(taken.Nodes), len(k.locker.cfg.Nodes), err)
	case errors.Is(err, redsync.ErrExtendFailed): // extended on a quorum, but too slowly to be valid
		k.lost = fmt.Errorf("%w: %s: extended too slowly to stay valid: %w", ErrLost, k.Key(), redsync.ErrExtendFailed)
	default:
		return fmt.Errorf("%w: %s: %w: %w", ErrLost, k.Key(), ErrUnavailable, err)
	}
	return k.lost
}

// Release deletes the lock on every node that still holds its value, even when ctx is cancelled
// (a cancelled job must still free its key), within Config.CallTimeout once an Extend under way
// has returned; a second Release does nothing. Its error wraps ErrLost when the lock was no longer
// held (nothing to undo), or ErrUnavailable when nodes did not answer; deletes that did not
// reach their node are retried in the background (see Close), and the lock expires by its TTL.
func (k *Lock) Release(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.released {
		return nil
	}
	k.released = true
	k.until.Store(nil)
	callCtx, cancel := k.locker.callContext(context.WithoutCancel(ctx), k.track, false)
	defer cancel()
	ok, err := k.m.UnlockContext(callCtx)
	// The janitor deletes the value where the acquire's SET NX has not been answered (it may land
	// after this delete) and where the release did not answer or was not waited for.
	unknown, t := k.track.unsettled(), tallyOf(err)
	switch {
	case !ok && t.early:
		unknown = append(unknown, t.untaken(len(k.locker.cfg.Nodes))...)
	case !ok:
		unknown = append(unknown, t.failed...)
	}
	deadline, _ := callCtx.Deadline()
	k.locker.janitor.add(unknown, k.Key(), k.Value(), deadline, k.track)
	if ok {
		k.locker.stats.released.Add(1)
		return nil
	}
	k.locker.stats.releaseFailed.Add(1)
	if k.lost != nil || len(t.failed) == 0 || len(t.taken)+t.expired >= k.locker.Quorum() {
		return fmt.Errorf("%w: %s was no longer held when released: %w", ErrLost, k.Key(), err)
	}
	return fmt.Errorf("%w: release %s (retried in the background; it expires within its TTL anyway): %w",
		ErrUnavailable, k.Key(), err)
}

// tally sorts the nodes a redsync error names by their answer: redsync joins one error per node
// that did not succeed, or returns a *ErrTaken alone once a quorum refused (fail-fast).
type tally struct {
	taken   []int // the key holds another value (for an extension: or none)
	failed  []int // no answer: I/O error, timeout, refused connection
	expired int   // a release found no key (redsync does not say where)
	early   bool  // a *ErrTaken alone: the nodes it does not name may not have answered
}

func tallyOf(err error) (t tally) {
	var taken *redsync.ErrTaken
	if errors.As(err, &taken) {
		return tally{taken: taken.Nodes, early: true}
	}
	var walk func(error)
	walk = func(e error) {
		switch x := e.(type) {
		case interface{ Unwrap() []error }:
			for _, c := range x.Unwrap() {
				walk(c)
			}
		case *redsync.ErrNodeTaken:
			t.taken = append(t.taken, x.Node)
		case *redsync.RedisError:
			t.failed = append(t.failed, x.Node)
		default:
			if errors.Is(e, redsync.ErrLockAlreadyExpired) {
				t.expired++
			}
		}
	}
	walk(err)
	return t
}

// untaken returns the nodes out of n that t does not name as holding another value.
func (t tally) untaken(n int) (nodes []int) {
	for i := range n {
		if !slices.Contains(t.taken, i) {
			nodes = append(nodes, i)
		}
	}
	return nodes
}
