package execlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4/redis"
	goredislib "github.com/redis/go-redis/v9"
)

// Why a second way to run a gated command (gate.go). With pipelining, the default, a command is
// written and answered by its node's pipeliner (pipeliner.go); whoever queued the command only
// waits for the answer. run's worker is then one goroutine waiting for another: handing the command
// to it, its deadline timer and the hand-back were over a quarter of a lock call's cost (without
// them the lock cycle benchmark ran 40% faster: docs/benchmarks.md, build Q). So redsync's goroutine
// takes the lock's turn on the node, queues the command itself and waits for the answer, until the
// round's context ends. If that ends first, a worker takes over: it waits for the answer and gives
// the turn back then, or, if the turn was still taken (a delete behind its own SET NX), waits for
// the turn until the command's deadline and sends it then, as run's worker would. Either way the
// command runs to its end, in the lock's turn, whatever the round's context: what the gates promise
// is unchanged. run still serves a Locker without pipelining, whose commands are each a round trip
// of the worker's own.

// queuedCmd is a gated command on a node's pipeliner.
type queuedCmd struct {
	pipe *pipeliner
	cmd  goredislib.Cmder
	// retry is sent when the node answers cmd with NOSCRIPT: the EVAL of an EVALSHA (a node that
	// restarted empty has no scripts). Nil for a SET NX.
	retry goredislib.Cmder
	done  chan struct{} // closed once cmd is answered
}

func (q *queuedCmd) send() {
	q.done = make(chan struct{})
	q.pipe.submit(q)
}

// wait waits for the node's answer until ctx ends. answered is false when ctx ended first; the
// command then still runs, and a later wait gets its answer.
func (q *queuedCmd) wait(ctx context.Context) (err error, answered bool) {
	for {
		select {
		case <-q.done:
		case <-ctx.Done():
			return ctx.Err(), false
		}
		err = q.cmd.Err()
		if q.retry != nil && goredislib.HasErrorPrefix(err, "NOSCRIPT") {
			q.cmd, q.retry = q.retry, nil
			q.send()
			continue
		}
		return err, true
	}
}

// queuedOp is what one gated command does in the lock's turn on its node, around the command.
type queuedOp struct {
	// before runs first; an error is the command's answer, and nothing is sent.
	before func(gate *nodeGate) error
	// after runs once the node answered, or failed to; its error is the command's.
	after func(gate *nodeGate, err error)
	// failed, if not nil, is called with the error of a command that failed, outside the turn,
	// whether or not the round still waits (as run's).
	failed func(error)
}

// queue runs q in the lock's turn on this node and returns the answer, or the round context's
// error if that ended first. It waits for the turn until the round ends; if the round ends first,
// a worker waits for the turn instead, until deadline, and sends q then (see run).
func (c *gatedConn) queue(q *queuedCmd, op queuedOp, deadline time.Time) error {
	gate := c.pool.gate
	select {
	case gate.turn <- struct{}{}:
	default:
		select {
		case gate.turn <- struct{}{}:
		case <-c.ctx.Done():
			c.pool.workers.do(func() { c.queueLater(q, op, deadline) })
			return c.ctx.Err()
		}
	}
	if err := c.start(q, op); err != nil {
		return err
	}
	err, answered := q.wait(c.ctx)
	if !answered {
		c.pool.workers.do(func() {
			err, _ := q.wait(context.Background())
			c.finish(op, err)
		})
		return err
	}
	c.finish(op, err)
	return err
}

// queueLater runs q in the lock's turn on this node, after its round: it waits for the turn until
// deadline, and for the answer as long as it takes.
func (c *gatedConn) queueLater(q *queuedCmd, op queuedOp, deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case c.pool.gate.turn <- struct{}{}:
	case <-t.C:
		if op.failed != nil {
			op.failed(fmt.Errorf("execlock: no turn on node #%d before the deadline: %w", c.pool.node, context.DeadlineExceeded))
		}
		return
	}
	if c.start(q, op) == nil {
		err, _ := q.wait(context.Background())
		c.finish(op, err)
	}
}

// start runs op.before in the turn and sends q, or gives the turn back when before refuses.
func (c *gatedConn) start(q *queuedCmd, op queuedOp) error {
	if err := op.before(c.pool.gate); err != nil {
		<-c.pool.gate.turn
		if op.failed != nil {
			op.failed(err)
		}
		return err
	}
	q.send()
	return nil
}

// finish ends a queued command whose answer came: after, the turn given back, failed.
func (c *gatedConn) finish(op queuedOp, err error) {
	op.after(c.pool.gate, err)
	<-c.pool.gate.turn
	if err != nil && op.failed != nil {
		op.failed(err)
	}
}

// newQueuedSetNX is redsync's SET NX: "SET name value PX ms NX".
func (c *gatedConn) newQueuedSetNX(name, value string, expiry time.Duration) *queuedCmd {
	return &queuedCmd{pipe: c.pool.pipe,
		cmd: goredislib.NewBoolCmd(context.Background(), "set", name, value, "px", expiry.Milliseconds(), "nx")}
}

// newQueuedEval is redsync's script call: EVALSHA, and EVAL if the node does not have the script.
func (c *gatedConn) newQueuedEval(script *redis.Script, keysAndArgs []any) *queuedCmd {
	args := func(verb, body string) []any {
		a := make([]any, 0, 3+len(keysAndArgs))
		return append(append(a, verb, body, script.KeyCount), keysAndArgs...)
	}
	ctx := context.Background()
	return &queuedCmd{pipe: c.pool.pipe,
		cmd:   goredislib.NewCmd(ctx, args("evalsha", script.Hash)...),
		retry: goredislib.NewCmd(ctx, args("eval", script.Src)...)}
}

// evalResult is the answer of a script call, as redsync's go-redis adapter gives it.
func evalResult(q *queuedCmd, err error) (any, error) {
	if err != nil {
		if errors.Is(err, goredislib.Nil) {
			return nil, nil
		}
		return nil, err
	}
	return q.cmd.(*goredislib.Cmd).Val(), nil
}
