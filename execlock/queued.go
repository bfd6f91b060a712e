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
// to it, its deadline timer and the hand-back were a large share of a lock call's cost
// (docs/benchmarks.md, "Why the Locker's own pipeliner"). So redsync's goroutine
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
	// script and keysAndArgs are an EVALSHA's, whose EVAL is sent when the node answers NOSCRIPT
	// (a node that restarted empty has no scripts); nil for a SET NX and once the EVAL is sent.
	script      *redis.Script
	keysAndArgs []any
	done        chan struct{} // closed once cmd is answered
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
		if q.script != nil && goredislib.HasErrorPrefix(err, "NOSCRIPT") {
			q.cmd = scriptCmd("eval", q.script.Src, q.script, q.keysAndArgs)
			q.script = nil
			q.send()
			continue
		}
		return err, true
	}
}

// queue runs q in the lock's turn on this node and returns the answer, or the round context's
// error if that ended first. It waits for the turn until the round ends; if the round ends first,
// a worker waits for the turn instead, until deadline, and sends q then (see run).
func (c *gatedConn) queue(q *queuedCmd, op gateOp, deadline time.Time) error {
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
func (c *gatedConn) queueLater(q *queuedCmd, op gateOp, deadline time.Time) {
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
func (c *gatedConn) start(q *queuedCmd, op gateOp) error {
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
func (c *gatedConn) finish(op gateOp, err error) {
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
	return &queuedCmd{pipe: c.pool.pipe, cmd: scriptCmd("evalsha", script.Hash, script, keysAndArgs),
		script: script, keysAndArgs: keysAndArgs}
}

// scriptCmd is "verb body numkeys keys... args...": verb EVALSHA with the script's hash, or EVAL
// with its source.
func scriptCmd(verb, body string, script *redis.Script, keysAndArgs []any) *goredislib.Cmd {
	args := make([]any, 0, 3+len(keysAndArgs))
	args = append(append(args, verb, body, script.KeyCount), keysAndArgs...)
	return goredislib.NewCmd(context.Background(), args...)
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
