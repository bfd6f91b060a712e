package execlock

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// markKey keys the context value that marks a lock call's commands for callHook.
type markKey struct{}

// callMark tells callHook which call of which lock a command belongs to.
type callMark struct {
	locker  *Locker
	track   *lockTrack
	acquire bool // the lock's acquire, not a later extension or release
}

// callContext bounds a call on the lock that track follows by CallTimeout, and marks its commands.
func (l *Locker) callContext(ctx context.Context, track *lockTrack, acquire bool) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithValue(ctx, markKey{}, &callMark{l, track, acquire}), l.cfg.CallTimeout)
}

// lockTrack follows a lock's acquire on each node: its commands there run one at a time, and the
// lock's later calls wait for the first to end. All but ended are guarded by the node's turn.
type lockTrack struct {
	turn     []chan struct{}   // capacity 1: held while a command of the acquire runs on the node
	last     []<-chan struct{} // Done of the context of the acquire's last command started on the node
	ended    []chan struct{}   // closed once the acquire's first command on the node has ended
	answered []bool            // set before ended is closed
}

func newLockTrack(nodes int) *lockTrack {
	t := &lockTrack{turn: make([]chan struct{}, nodes), last: make([]<-chan struct{}, nodes),
		ended: make([]chan struct{}, nodes), answered: make([]bool, nodes)}
	for i := range nodes {
		t.turn[i], t.ended[i] = make(chan struct{}, 1), make(chan struct{})
	}
	return t
}

// end records the end of a command of the acquire on node; the caller holds the node's turn.
func (t *lockTrack) end(node int, err error) {
	select {
	case <-t.ended[node]:
	default:
		t.answered[node] = err == nil || errors.Is(err, redis.Nil)
		close(t.ended[node])
	}
}

// unsettled returns the nodes where the acquire's command has not been answered: it may still
// run there, after any delete sent so far.
func (t *lockTrack) unsettled() []int {
	var nodes []int
	for i, ch := range t.ended {
		select {
		case <-ch:
			if t.answered[i] {
				continue
			}
		default:
		}
		nodes = append(nodes, i)
	}
	return nodes
}

// callHook is the hook New adds to each node's client. redsync's fail-fast rounds return once a
// quorum has answered, and an acquire then cancels its round's context while the commands to the
// other nodes are still on their way. callHook runs each command of the Locker's calls to its
// deadline whatever the cancellation (go-redis would drop those not yet on a connection, and a
// lock would stay on a bare quorum), and keeps a lock's commands on each node in order: sent on
// other connections, a delete could overtake the SET NX it follows, find nothing, and leave the
// SET NX to land after it, a lock nobody holds. So an acquire's commands on a node run one at a
// time; one whose context ended before it reached the client is dropped once a command of a later
// round (the clean-up of a failed attempt) has started there; and the lock's later calls wait for
// the acquire's first command on the node to end. Other commands pass unchanged.
type callHook struct {
	locker *Locker
	node   int
}

// DialHook changes nothing.
func (callHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook changes nothing: the Locker sends no pipeline of a lock call.
func (callHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook runs a lock call's command as the type's documentation says.
func (h callHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		m, _ := ctx.Value(markKey{}).(*callMark)
		deadline, ok := ctx.Deadline()
		if m == nil || m.locker != h.locker || !ok {
			return next(ctx, cmd)
		}
		// Unmarked: go-redis runs a new connection's handshake through the hooks too.
		unmarked := context.WithValue(context.WithoutCancel(ctx), markKey{}, (*callMark)(nil))
		detached, cancel := context.WithDeadline(unmarked, deadline)
		defer cancel()
		t := m.track
		if !m.acquire {
			select {
			case <-t.ended[h.node]:
			case <-detached.Done():
			}
			return next(detached, cmd)
		}
		abandoned := ctx.Err()
		select {
		case t.turn[h.node] <- struct{}{}:
		case <-detached.Done():
			return detached.Err()
		}
		defer func() { <-t.turn[h.node] }()
		if last := t.last[h.node]; abandoned != nil && last != nil && last != ctx.Done() {
			return abandoned
		}
		t.last[h.node] = ctx.Done()
		err := next(detached, cmd)
		t.end(h.node, err)
		return err
	}
}
