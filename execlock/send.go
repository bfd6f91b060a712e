package execlock

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// callMark tells send which call of which lock a command belongs to. Its context key is the
// call's Locker.
type callMark struct {
	track   lockTrack
	acquire bool // the lock's acquire, not a later extension or release
}

// callContext bounds a call on the lock that track follows by CallTimeout, and marks its commands.
func (l *Locker) callContext(ctx context.Context, track lockTrack, acquire bool) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithValue(ctx, l, &callMark{track, acquire}), l.cfg.CallTimeout)
}

// lockTrack follows a lock's acquire on each node (see Locker.send).
type lockTrack []nodeTrack

// nodeTrack follows the acquire on one node; turn guards all but ended.
type nodeTrack struct {
	turn     chan struct{}   // capacity 1: held while a command of the acquire runs on the node
	last     <-chan struct{} // Done of the context of the acquire's last command started there
	ended    chan struct{}   // closed once the acquire's first command there has ended
	answered bool            // that command was answered; set before ended is closed
}

// unsettled returns the nodes where the acquire's command has not been answered: it may still
// run there, after any delete sent so far.
func (t lockTrack) unsettled() (nodes []int) {
	for i := range t {
		if !t[i].settled() {
			nodes = append(nodes, i)
		}
	}
	return nodes
}

// settled tells whether the acquire's command on the node has been answered: nothing the acquire
// sent there can land after a command sent from now on. A nil n is not settled.
func (n *nodeTrack) settled() bool {
	if n == nil {
		return false
	}
	select {
	case <-n.ended:
		return n.answered
	default:
		return false
	}
}

// send runs a command of a lock call on a node through its wire. redsync cancels a round once a
// quorum has answered, which would drop the commands not yet sent and leave the lock on a bare
// quorum: send runs each to the call's deadline. It also keeps a lock's commands on a node in order,
// lest a delete overtake its SET NX: an acquire's commands there run one at a time, a stale round's
// is dropped once a later round (a failed attempt's clean-up) has started there, and later calls wait
// for the acquire's first one.
func (l *Locker) send(ctx context.Context, node int, cmd redis.Cmder) error {
	w := l.wires[node]
	m, _ := ctx.Value(l).(*callMark)
	deadline, ok := ctx.Deadline()
	if m == nil || !ok {
		return w.do(ctx, cmd)
	}
	detached, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	n := &m.track[node]
	if !m.acquire {
		select {
		case <-n.ended:
		case <-detached.Done():
		}
		return w.do(detached, cmd)
	}
	abandoned := ctx.Err()
	select {
	case n.turn <- struct{}{}:
	case <-detached.Done():
		return detached.Err()
	}
	defer func() { <-n.turn }()
	if abandoned != nil && n.last != nil && n.last != ctx.Done() {
		return abandoned
	}
	n.last = ctx.Done()
	err := w.do(detached, cmd)
	select {
	case <-n.ended:
	default:
		n.answered = err == nil || errors.Is(err, redis.Nil)
		close(n.ended)
	}
	return err
}
