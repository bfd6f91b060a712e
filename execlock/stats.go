package execlock

import "sync/atomic"

// Stats counts a Locker's lock calls since it was created, for metrics. Every field only grows.
// "Failed lock attempts" are Taken + Unavailable.
type Stats struct {
	// Acquired counts attempts that got their lock.
	Acquired uint64
	// Taken counts attempts refused because another holder had the lock (contention). A
	// TryExecSlot or TryQueueSlot call adds one per slot it found taken.
	Taken uint64
	// Unavailable counts attempts that failed because a quorum of nodes did not answer in time.
	Unavailable uint64
	// Extended counts successful extensions.
	Extended uint64
	// ExtendFailed counts extensions that returned ErrLost.
	ExtendFailed uint64
	// Released counts locks released on a quorum.
	Released uint64
	// ReleaseFailed counts releases that found the lock lost or the nodes unavailable.
	ReleaseFailed uint64
}

type counters struct {
	acquired, taken, unavailable, extended, extendFailed, released, releaseFailed atomic.Uint64
}

// Stats returns a snapshot of the Locker's counters. Attempts ended by their context, and
// invalid arguments, are not counted.
func (l *Locker) Stats() Stats {
	c := &l.stats
	return Stats{
		Acquired:      c.acquired.Load(),
		Taken:         c.taken.Load(),
		Unavailable:   c.unavailable.Load(),
		Extended:      c.extended.Load(),
		ExtendFailed:  c.extendFailed.Load(),
		Released:      c.released.Load(),
		ReleaseFailed: c.releaseFailed.Load(),
	}
}
