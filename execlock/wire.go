package execlock

import (
	"context"
	"errors"
	"sync"
	"time"

	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/redis/go-redis/v9"
)

// wire sends a node's lock commands in pipelines, one pipeline at a time, in the order the commands
// come: concurrent lock calls share round trips and need no pooled connection each, which under load
// costs more than the commands themselves.
type wire struct {
	client *redis.Client

	mu       sync.Mutex
	queue    []wireCall
	flushing bool // a goroutine is sending the queue
}

// wireCall is one command waiting for its pipeline; ctx carries its deadline.
type wireCall struct {
	ctx  context.Context
	cmd  redis.Cmder
	done chan struct{}
}

// do sends cmd in the node's next pipeline and returns its error, or ctx's once ctx ends first. A
// command whose ctx ended before its pipeline was sent is not sent.
func (w *wire) do(ctx context.Context, cmd redis.Cmder) error {
	c := wireCall{ctx: ctx, cmd: cmd, done: make(chan struct{})}
	w.mu.Lock()
	w.queue = append(w.queue, c)
	if !w.flushing {
		w.flushing = true
		go w.flush()
	}
	w.mu.Unlock()
	select {
	case <-c.done:
		return cmd.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush sends what is queued, one pipeline after another, until the queue is empty.
func (w *wire) flush() {
	for {
		w.mu.Lock()
		calls := w.queue
		w.queue = nil
		if len(calls) == 0 {
			w.flushing = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		w.send(calls)
	}
}

// send runs calls in one pipeline, bounded by the latest of their deadlines: a caller whose deadline
// comes first stops waiting then (see do), and the others' commands still get their time.
func (w *wire) send(calls []wireCall) {
	p, sent := w.client.Pipeline(), calls[:0]
	var deadline time.Time
	for _, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.cmd.SetErr(err)
			close(c.done)
			continue
		}
		if d, ok := c.ctx.Deadline(); ok && d.After(deadline) {
			deadline = d
		}
		_ = p.Process(c.ctx, c.cmd) // queues it
		sent = append(sent, c)
	}
	ctx := context.Background()
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	_, _ = p.Exec(ctx) // each command carries its own error
	for _, c := range sent {
		close(c.done)
	}
}

// nodePool is a node's redsync pool: its connections send through the Locker (see Locker.send).
type nodePool struct {
	locker *Locker
	node   int
}

// Get returns a connection whose commands belong to the call that ctx marks.
func (p nodePool) Get(ctx context.Context) (rsredis.Conn, error) { return nodeConn{p, ctx}, nil }

// nodeConn is a redsync connection to one node; it sends each command as a lock call's.
type nodeConn struct {
	pool nodePool
	ctx  context.Context
}

// run sends cmd as a lock call's command and returns its value; redis.Nil (no such key) is no error.
func run[T any](c nodeConn, cmd interface {
	redis.Cmder
	Val() T
}) (T, error) {
	if err := c.pool.locker.send(c.ctx, c.pool.node, cmd); err != nil && !errors.Is(err, redis.Nil) {
		var zero T
		return zero, err
	}
	return cmd.Val(), nil
}

// Get returns the value of name, "" when it has none.
func (c nodeConn) Get(name string) (string, error) {
	return run[string](c, redis.NewStringCmd(c.ctx, "get", name))
}

// Set sets name to value.
func (c nodeConn) Set(name, value string) (bool, error) {
	reply, err := run[string](c, redis.NewStatusCmd(c.ctx, "set", name, value))
	return reply == "OK", err
}

// SetNX sets name to value for expiry unless name exists, and tells whether it did.
func (c nodeConn) SetNX(name, value string, expiry time.Duration) (bool, error) {
	return run[bool](c, redis.NewBoolCmd(c.ctx, "set", name, value, "px", expiry.Milliseconds(), "nx"))
}

// Eval runs the script whole, since a node that restarted empty has no script cache.
func (c nodeConn) Eval(script *rsredis.Script, keysAndArgs ...any) (any, error) {
	return run[any](c, redis.NewCmd(c.ctx, append([]any{"eval", script.Src, script.KeyCount}, keysAndArgs...)...))
}

// ScriptLoad loads the script and sets its hash.
func (c nodeConn) ScriptLoad(script *rsredis.Script) error {
	hash, err := run[string](c, redis.NewStringCmd(c.ctx, "script", "load", script.Src))
	if err == nil {
		script.Hash = hash
	}
	return err
}

// PTTL returns how long name lives.
func (c nodeConn) PTTL(name string) (time.Duration, error) {
	return run[time.Duration](c, redis.NewDurationCmd(c.ctx, time.Millisecond, "pttl", name))
}

// Close does nothing: the connection holds nothing of its own.
func (nodeConn) Close() error { return nil }
