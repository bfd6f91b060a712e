package execlock

import (
	"errors"
	"slices"

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
