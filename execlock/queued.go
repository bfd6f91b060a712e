package execlock

import (
	"context"
	"errors"
	"time"

	"github.com/go-redsync/redsync/v4/redis"
	goredislib "github.com/redis/go-redis/v9"
)

// Why a second way to run a gated command (gate.go). With pipelining, the default, a command is
// answered by its node's pipeliner, whose own goroutine writes and reads the batch; whoever queued
// the command only waits for the answer. run's worker is then one goroutine waiting for another:
// handing the command to it, its deadline timer and the hand-back took about a fifth of the
// process's CPU in the unique benchmark (docs/benchmarks.md, build Q). So while the lock's turn on
// the node is free, redsync's goroutine queues the command itself, on the node's deferred
// pipeliner, and waits for the answer until the round's context ends. If that ends first, a worker
// waits for the answer instead and gives the turn back then, as run's worker would. Either way the
// command runs to its end, in the lock's turn, whatever the round's context: what the gates
// promise is unchanged. When the turn is not free (a command of the same lock is still on the
// node: a delete behind its own SET NX), run does it all as before.

// queuedCmd is a gated command on a node's deferred pipeliner.
type queuedCmd struct {
	ap  *goredislib.AutoPipeliner
	ctx context.Context // the command's: the round's values without its cancellation
	cmd goredislib.Cmder
	// retry is sent when the node answers cmd with NOSCRIPT: the EVAL of an EVALSHA (a node that
	// restarted empty has no scripts). Nil for a SET NX.
	retry  goredislib.Cmder
	answer goredislib.AutoFuture
}

func (q *queuedCmd) send() { q.answer = q.ap.Submit(q.ctx, q.cmd) }

// wait waits for the node's answer until ctx ends. answered is false when ctx ended first; the
// command then still runs, and a later wait gets its answer.
func (q *queuedCmd) wait(ctx context.Context) (err error, answered bool) {
	for {
		err = q.answer.WaitContext(ctx)
		if err != nil && err == ctx.Err() {
			return err, false
		}
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

// queue runs q in the lock's turn on this node if the turn is free at once, and returns the
// answer, or the round context's error if that ended first. handled is false when the turn is
// taken: nothing was done, and the caller uses run instead.
func (c *gatedConn) queue(q *queuedCmd, op queuedOp) (err error, handled bool) {
	gate := c.pool.gate
	select {
	case gate.turn <- struct{}{}:
	default:
		return nil, false
	}
	if err := op.before(gate); err != nil {
		<-gate.turn
		if op.failed != nil {
			op.failed(err)
		}
		return err, true
	}
	q.send()
	err, answered := q.wait(c.ctx)
	if !answered {
		c.pool.workers.do(func() {
			err, _ := q.wait(context.Background())
			c.finish(op, err)
		})
		return err, true
	}
	c.finish(op, err)
	return err, true
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
	ctx := context.WithoutCancel(c.ctx)
	return &queuedCmd{ap: c.pool.async, ctx: ctx,
		cmd: goredislib.NewBoolCmd(ctx, "set", name, value, "px", expiry.Milliseconds(), "nx")}
}

// newQueuedEval is redsync's script call: EVALSHA, and EVAL if the node has not the script.
func (c *gatedConn) newQueuedEval(script *redis.Script, keysAndArgs []any) *queuedCmd {
	ctx := context.WithoutCancel(c.ctx)
	args := func(verb, body string) []any {
		a := make([]any, 0, 3+len(keysAndArgs))
		return append(append(a, verb, body, script.KeyCount), keysAndArgs...)
	}
	return &queuedCmd{ap: c.pool.async, ctx: ctx,
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
