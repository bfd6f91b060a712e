package execlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
)

// Lock is one held queue or execution lock. Its methods are safe for concurrent use: a heartbeat
// goroutine may Extend while the worker that finishes the job calls Release.
type Lock struct {
	locker *Locker
	typ    lockType
	key    string
	value  string
	slot   int
	ttl    time.Duration
	failed int
	until  atomic.Pointer[time.Time] // with its monotonic clock reading; nil after Release

	mu       sync.Mutex // serialises calls on m: a redsync Mutex is not safe for concurrent use
	m        *redsync.Mutex
	track    *lockTrack
	lost     error // set once the lock is known to be lost for good; Extend then returns it
	released bool
}

func newLock(l *Locker, m *redsync.Mutex, track *lockTrack, typ lockType, slot int, ttl time.Duration) *Lock {
	k := &Lock{locker: l, typ: typ, key: m.Name(), value: m.Value(), slot: slot, ttl: ttl, m: m, track: track}
	k.setUntil(m.Until())
	return k
}

// Key returns the lock's Redis key.
func (k *Lock) Key() string { return k.key }

// Value returns the lock's value in Redis: "<Config.NodeName>:<random>".
func (k *Lock) Value() string { return k.value }

// Slot returns the slot the lock holds.
func (k *Lock) Slot() int { return k.slot }

// FailedAttempts returns how many slots TryExecSlot or TryQueueSlot found taken before this one;
// 0 for a lock from TryExec or TryQueue.
func (k *Lock) FailedAttempts() int { return k.failed }

// Until returns the end of the lock's validity as this process reckons it: the time the call
// that took or last extended the lock started, plus the TTL, minus the call's duration and a
// clock drift allowance (1% of the TTL). Past it, another holder may take the lock. Until is
// not a guarantee before it either: a Redis node that restarts empty forgets the lock (see the
// package documentation). After Release it returns the zero time.
func (k *Lock) Until() time.Time {
	if u := k.until.Load(); u != nil {
		return *u
	}
	return time.Time{}
}

func (k *Lock) setUntil(u time.Time) { k.until.Store(&u) }

// Extend resets the lock's TTL on a quorum of nodes and moves Until forward. It only extends a
// lock whose value it finds on a node; it never takes the lock again where it lapsed.
//
// It returns nil; or an error wrapping ErrLost when the lock could not be extended: its
// validity ended (Until passed), or a quorum of nodes no longer holds its value (expired or
// taken by another; lost for good, every later Extend returns the same error at once), or
// nodes failed to answer (the error also wraps ErrUnavailable and the nodes' errors; the lock
// may still be valid until Until, and a later Extend may succeed). A job must stop when its
// execution lock is lost. Extend returns ErrReleased after Release, and the context's error
// when ctx ended. Each call takes at most Config.CallTimeout.
func (k *Lock) Extend(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.released:
		return fmt.Errorf("%w: %s", ErrReleased, k.key)
	case k.lost != nil:
		return k.lost
	case ctx.Err() != nil:
		return fmt.Errorf("execlock: extend %s: %w", k.key, ctx.Err())
	}
	st := &k.locker.stats
	if until := k.Until(); !time.Now().Before(until) {
		st.extendFailed.Add(1)
		k.lost = fmt.Errorf("%w: %s: validity ended at %s", ErrLost, k.key, until.Format(time.RFC3339Nano))
		return k.lost
	}
	callCtx, cancel := k.locker.callContext(ctx, k.track, false)
	defer cancel()
	ok, err := k.m.ExtendContext(callCtx)
	if ok {
		st.extended.Add(1)
		k.setUntil(k.m.Until())
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("execlock: extend %s: %w", k.key, cerr)
	}
	st.extendFailed.Add(1)
	return k.extendError(err)
}

// extendError translates redsync's answer to a failed extension.
func (k *Lock) extendError(err error) error {
	var taken *redsync.ErrTaken
	switch {
	case errors.As(err, &taken):
		// A quorum of nodes holds another value, or none. Ours does not come back there:
		// Extend never sets a key.
		k.lost = fmt.Errorf("%w: %s: not held on %d of %d nodes any more (expired, or taken by another): %w",
			ErrLost, k.key, len(taken.Nodes), len(k.locker.cfg.Nodes), err)
		return k.lost
	case err == nil, errors.Is(err, redsync.ErrExtendFailed):
		// A quorum extended, but too slowly for the new validity to have started.
		k.lost = fmt.Errorf("%w: %s: extended too slowly to stay valid: %w", ErrLost, k.key, redsync.ErrExtendFailed)
		return k.lost
	default:
		return fmt.Errorf("%w: %s: %w: %w", ErrLost, k.key, ErrUnavailable, err)
	}
}

// Release deletes the lock on every node that still holds its value. It runs even when ctx is
// cancelled (a cancelled job must still free its key), bounded by Config.CallTimeout once an
// Extend in progress has returned. A second Release does nothing.
//
// It returns nil when the lock was released on a quorum; an error wrapping ErrLost when the lock
// was no longer held (expired or taken by another): nothing to undo, and no reason to fail a job
// that otherwise succeeded; or an error wrapping ErrUnavailable when nodes did not answer. Deletes
// that did not reach their node are retried in the background until it answers (see Close), and
// the lock expires by itself within its TTL in any case.
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
	// The janitor deletes the value where the acquire's SET NX has not been answered (it may run
	// after the release's delete) and where the release did not answer or was not waited for.
	unknown, t := k.track.unsettled(), tallyOf(err)
	if !ok && t.early {
		unknown = append(unknown, t.untaken(len(k.locker.cfg.Nodes))...)
	} else if !ok {
		unknown = append(unknown, t.failed...)
	}
	deadline, _ := callCtx.Deadline()
	k.locker.janitor.add(unknown, k.key, k.value, deadline)
	st := &k.locker.stats
	if ok {
		st.released.Add(1)
		return nil
	}
	st.releaseFailed.Add(1)
	if k.lost != nil || len(t.failed) == 0 || len(t.taken)+t.expired >= k.locker.quorum {
		return fmt.Errorf("%w: %s was no longer held when released: %w", ErrLost, k.key, err)
	}
	return fmt.Errorf("%w: release %s (retried in the background; it expires within its TTL anyway): %w",
		ErrUnavailable, k.key, err)
}

// KeepAlive extends the lock every interval (ExecTTL/3 or QueueTTL/3 when interval <= 0) until
// ctx ends, the lock is released, or an extension fails. It returns nil in the first two cases
// and Extend's error (wrapping ErrLost) in the last: the caller must then stop the job. Run it
// in its own goroutine with a context that ends when the job does.
func (k *Lock) KeepAlive(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = k.ttl / 3
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		err := k.Extend(ctx)
		switch {
		case err == nil:
		case errors.Is(err, ErrReleased), ctx.Err() != nil:
			return nil
		default:
			return err
		}
	}
}

// String describes the lock for logs: type, key, slot and validity.
func (k *Lock) String() string {
	return fmt.Sprintf("%s lock %s (slot %d) until %s", k.typ, k.key, k.slot, k.Until().Format(time.RFC3339Nano))
}
