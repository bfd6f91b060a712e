package execlock

import (
	"errors"

	"github.com/go-redsync/redsync/v4"
)

// Sentinel errors. An error of this package wraps one of them, or the caller's context error;
// only an extension that failed because nodes did not answer wraps two: ErrLost and
// ErrUnavailable. Messages start with "execlock: ".
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

// tally counts, per outcome, the nodes named in an error of redsync. redsync joins one error per
// node that did not succeed (errors.Join), or returns a single *ErrTaken when a quorum refused.
type tally struct {
	taken   int // the key holds another value (or, for extend, is missing)
	expired int // the key is missing (release only)
	failed  int // the node did not answer: I/O error, timeout, refused
}

func tallyOf(err error) tally {
	var t tally
	var walk func(error)
	walk = func(e error) {
		switch x := e.(type) {
		case nil:
		case interface{ Unwrap() []error }:
			for _, c := range x.Unwrap() {
				walk(c)
			}
		case *redsync.ErrTaken:
			t.taken += len(x.Nodes)
		case *redsync.ErrNodeTaken:
			t.taken++
		case *redsync.RedisError:
			t.failed++
		default:
			if errors.Is(e, redsync.ErrLockAlreadyExpired) {
				t.expired++
			}
		}
	}
	walk(err)
	return t
}
