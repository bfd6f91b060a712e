package execlock

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-redsync/redsync/v4/redis"
	goredislib "github.com/redis/go-redis/v9"
)

// Why gates. With WithFailFast, redsync returns from a round (acquire, extend, release) as soon as
// a quorum has decided, and cancels the round's context, which stops the commands not yet sent to
// the other nodes. Measured consequences (see TestTryExecRace, TestMinorityDown, TestRestartEmpty):
//
//   - A lock is set, and extended, on a bare quorum only: the third of three nodes usually never
//     sees the SET NX, nor later the PEXPIRE. Losing any one node then loses the lock, so a
//     minority outage would stop running jobs.
//   - A failed attempt's clean-up round fails fast too (two nodes answer "another value"), and its
//     cancelled context stops the delete on the node where our SET NX did succeed.
//   - A clean-up delete can reach a node before the attempt's own SET NX, which lands afterwards.
//
// The last two leave partial locks that nobody holds, for a whole TTL; under contention they pile
// up on different nodes until no contender reaches a quorum (50 contenders on 3 nodes went whole
// runs without a winner, keys left behind after every call had returned).
//
// So each lock gets a gate per node that runs its commands on that node one at a time, each to
// completion whatever the round's context: the round takes the answer if it comes before the
// round's context ends, and the command goes on in the background otherwise, until the round's
// deadline (a delete: until CallTimeout after it started). Once a delete has started on a node, a
// SET NX of the same lock that had not started there is dropped. A delete that fails (the node is
// down or stalled) goes to the Locker's janitor, which retries it until the node answers.
//
// A delete that could not even start in time, because an earlier command of its lock still runs
// on the node (a pipelined command waits for the batches ahead of it, bounded by the client's
// timeouts, not by its call's deadline), reaches the janitor only once that command has ended:
// the janitor's deletes do not wait for the gate, and one sent while a SET NX of the same lock
// still waits in the client would find nothing to delete and leave the SET NX's key behind. And
// after a SET NX that ended without an answer (which the node may run later, once it answers
// again), even a successful delete goes to the janitor too, which confirms it (janitor.go).

// errAbandoned is what a dropped SET NX returns; redsync has stopped listening by then.
var errAbandoned = errors.New("execlock: acquire abandoned: the lock was released on this node first")

// nodeGate is the state of one lock on one node.
type nodeGate struct {
	turn     chan struct{} // capacity 1: held while a command of this lock runs on this node
	released bool          // a delete started on this node; guarded by turn
	// unanswered: a SET NX of this lock ended here without the node's answer, so it may yet run
	// there (see the janitor's confirmations); guarded by turn.
	unanswered bool
}

// lockNode is how the gates reach one node.
type lockNode struct {
	pool redis.Pool
	// pipe is the node's pipeliner (queued.go); nil when pipelining is disabled.
	pipe *pipeliner
}

// gatedPools wraps each node's pool with a fresh gate, for one redsync Mutex. Commands run on w;
// deletes run for up to deleteTimeout after their round ended, and those that fail go to j.
func gatedPools(nodes []lockNode, deleteTimeout time.Duration, j *janitor, w *workers) []redis.Pool {
	gated := make([]redis.Pool, len(nodes))
	for i, n := range nodes {
		gated[i] = &gatedPool{
			inner: n.pool, pipe: n.pipe, node: i, gate: &nodeGate{turn: make(chan struct{}, 1)},
			deleteTimeout: deleteTimeout, janitor: j, workers: w,
		}
	}
	return gated
}

type gatedPool struct {
	inner         redis.Pool
	pipe          *pipeliner
	node          int
	gate          *nodeGate
	deleteTimeout time.Duration
	janitor       *janitor
	workers       *workers
}

func (p *gatedPool) Get(ctx context.Context) (redis.Conn, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	return &gatedConn{pool: p, ctx: ctx}, nil
}

// gatedConn gates the two commands redsync's Mutex uses to lock, extend and unlock: SetNX and
// Eval. The others pass through.
type gatedConn struct {
	pool *gatedPool
	ctx  context.Context
}

type result struct {
	v   any
	err error
}

// run runs op on this node in its turn, detached from the round's cancellation, until deadline.
// It returns op's answer, or the round context's error if that ends first. When op fails or
// cannot run in time, failed (if not nil) is called with the error, whether or not the round
// still waits.
func (c *gatedConn) run(deadline time.Time, op func(ctx context.Context, gate *nodeGate) (any, error), failed func(error)) (any, error) {
	done := make(chan result, 1)
	c.pool.workers.do(func() {
		ctx, cancel := context.WithDeadline(context.WithoutCancel(c.ctx), deadline)
		defer cancel()
		r := c.inTurn(ctx, op)
		if r.err != nil && failed != nil {
			failed(r.err)
		}
		done <- r
	})
	select {
	case r := <-done:
		return r.v, r.err
	case <-c.ctx.Done():
		return nil, c.ctx.Err()
	}
}

func (c *gatedConn) inTurn(ctx context.Context, op func(ctx context.Context, gate *nodeGate) (any, error)) result {
	gate := c.pool.gate
	select {
	case gate.turn <- struct{}{}:
	case <-ctx.Done():
		return result{err: ctx.Err()}
	}
	defer func() { <-gate.turn }()
	v, err := op(ctx, gate)
	return result{v, err}
}

// roundDeadline is the deadline of the round's context, or CallTimeout from now if it has none.
func (c *gatedConn) roundDeadline() time.Time {
	if dl, ok := c.ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(c.pool.deleteTimeout)
}

// gateOp is what one command of a lock does on its node in the lock's turn there, around the
// command itself, whichever way the command is sent (queue or alone).
type gateOp struct {
	// before runs first; an error is the command's answer, and nothing is sent.
	before func(gate *nodeGate) error
	// after runs once the node answered, or failed to; its error is the command's.
	after func(gate *nodeGate, err error)
	// failed, if not nil, is called with the error of a command that failed, outside the turn,
	// whether or not the round still waits.
	failed func(error)
}

// alone runs op's command on a round trip of its own, through run.
func (c *gatedConn) alone(deadline time.Time, op gateOp, call func(conn redis.Conn) (any, error)) (any, error) {
	return c.run(deadline, func(ctx context.Context, gate *nodeGate) (any, error) {
		if err := op.before(gate); err != nil {
			return nil, err
		}
		conn, err := c.pool.inner.Get(ctx)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		v, err := call(conn)
		op.after(gate, err)
		return v, err
	}, op.failed)
}

func (c *gatedConn) SetNX(name string, value string, expiry time.Duration) (bool, error) {
	deadline := c.roundDeadline()
	op := gateOp{
		before: func(gate *nodeGate) error {
			if gate.released {
				return errAbandoned
			}
			// Only the round's deadline stops a SET NX, not its cancellation: redsync cancels the
			// round once a quorum answered, and the other nodes must still get the lock.
			if !time.Now().Before(deadline) {
				return context.DeadlineExceeded
			}
			return nil
		},
		after: func(gate *nodeGate, err error) {
			if err != nil {
				gate.unanswered = true
			}
		},
	}
	if c.pool.pipe != nil {
		q := c.newQueuedSetNX(name, value, expiry)
		if err := c.queue(q, op, deadline); err != nil {
			return false, err
		}
		return q.cmd.(*goredislib.BoolCmd).Val(), nil
	}
	v, err := c.alone(deadline, op, func(conn redis.Conn) (any, error) { return conn.SetNX(name, value, expiry) })
	ok, _ := v.(bool)
	return ok, err
}

func (c *gatedConn) Eval(script *redis.Script, keysAndArgs ...any) (any, error) {
	deadline := c.roundDeadline()
	del := isDeleteScript(script)
	op := gateOp{
		before: func(gate *nodeGate) error {
			if del {
				// Before the call: even if this delete fails, a SET NX not yet sent must not be.
				gate.released = true
			}
			return nil
		},
		after: func(gate *nodeGate, err error) {
			if del && err == nil && gate.unanswered {
				c.pool.janitorAdd(keysAndArgs) // to be confirmed
			}
		},
	}
	if del {
		deadline = time.Now().Add(c.pool.deleteTimeout)
		op.failed = func(err error) {
			if !errors.Is(err, goredislib.ErrClosed) {
				c.pool.deleteLater(keysAndArgs)
			}
		}
	}
	if c.pool.pipe != nil {
		q := c.newQueuedEval(script, keysAndArgs)
		return evalResult(q, c.queue(q, op, deadline))
	}
	return c.alone(deadline, op, func(conn redis.Conn) (any, error) { return conn.Eval(script, keysAndArgs...) })
}

// deleteLater hands a delete that failed to the janitor, once no other command of its lock runs
// on this node: the delete may have failed because it never got its turn. Taking the turn marks
// the lock released here first, so a SET NX still waiting for its turn is not sent.
func (p *gatedPool) deleteLater(keysAndArgs []any) {
	p.workers.do(func() {
		p.gate.turn <- struct{}{}
		p.gate.released = true
		<-p.gate.turn
		p.janitorAdd(keysAndArgs)
	})
}

// janitorAdd hands the delete of the lock in redsync's script arguments (key, value) to the
// janitor.
func (p *gatedPool) janitorAdd(keysAndArgs []any) {
	if p.janitor == nil {
		return
	}
	key, _ := keysAndArgs[0].(string)
	value, _ := keysAndArgs[1].(string)
	p.janitor.add(p.node, key, value)
}

func (c *gatedConn) Get(name string) (string, error) {
	conn, err := c.pool.inner.Get(c.ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.Get(name)
}

func (c *gatedConn) Set(name string, value string) (bool, error) {
	conn, err := c.pool.inner.Get(c.ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	return conn.Set(name, value)
}

func (c *gatedConn) ScriptLoad(script *redis.Script) error {
	conn, err := c.pool.inner.Get(c.ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.ScriptLoad(script)
}

func (c *gatedConn) PTTL(name string) (time.Duration, error) {
	conn, err := c.pool.inner.Get(c.ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.PTTL(name)
}

func (c *gatedConn) Close() error { return nil }

// isDeleteScript tells redsync's unlock script (compare-and-delete) from its extend script.
func isDeleteScript(s *redis.Script) bool {
	return strings.Contains(s.Src, `"DEL"`)
}
