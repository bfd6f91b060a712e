package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobpipe/jobpipe/execlock"
	"github.com/jobpipe/jobpipe/internal/redisproc"
)

// redisSet is the lock nodes of a run: the ones named by RedisNodes, or throw-away processes.
type redisSet struct {
	nodes   []string
	procs   []*redisproc.Server
	dir     string // the spawned servers' working directory
	prefix  string
	hook    *lockHook
	mu      sync.Mutex
	clients []*redis.Client
}

// openRedis starts spawn redis-server processes, or uses nodes, and checks that each answers.
func openRedis(ctx context.Context, nodes []string, spawn int, schema string) (rs *redisSet, err error) {
	rs = &redisSet{hook: &lockHook{}, prefix: "jobpipe:bench:" + schema + ":" + randomHex(4) + ":"}
	defer func() {
		if err != nil {
			rs.close(context.WithoutCancel(ctx))
		}
	}()
	if spawn > 0 {
		bin, err := redisproc.Binary()
		if err != nil {
			return nil, fmt.Errorf("--spawn-redis: %w", err)
		}
		if rs.dir, err = os.MkdirTemp("", "jobpipe-bench-redis-"); err != nil {
			return nil, fmt.Errorf("--spawn-redis: %w", err)
		}
		for range spawn {
			p, err := redisproc.Start(ctx, bin, rs.dir, 0)
			if err != nil {
				return nil, fmt.Errorf("--spawn-redis: %w", err)
			}
			rs.procs = append(rs.procs, p)
			rs.nodes = append(rs.nodes, p.Addr)
		}
	} else {
		rs.nodes = nodes
	}
	clients, err := rs.newClients()
	if err != nil {
		return nil, err
	}
	for i, c := range clients {
		if err := c.Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("the Redis node %s does not answer (set --redis-url or REDIS_URL, or use --spawn-redis N): %w", rs.nodes[i], err)
		}
	}
	return rs, nil
}

// newClients returns a client per node, with the lock-counting hook; closed by close.
func (rs *redisSet) newClients() ([]*redis.Client, error) {
	clients, err := execlock.NewClients(rs.nodes...)
	if err != nil {
		return nil, err
	}
	for _, c := range clients {
		c.AddHook(rs.hook)
	}
	rs.mu.Lock()
	rs.clients = append(rs.clients, clients...)
	rs.mu.Unlock()
	return clients, nil
}

// plainClient returns a client of node i without the lock hook, for the bench's own commands; the
// caller closes it.
func (rs *redisSet) plainClient(i int) (*redis.Client, error) {
	opts, err := execlock.ParseNode(rs.nodes[i])
	if err != nil {
		return nil, err
	}
	return redis.NewClient(opts), nil
}

// leftover counts the run's lock keys still in Redis (every lock should be released by now) and
// deletes them.
func (rs *redisSet) leftover(ctx context.Context) (int64, error) {
	var n int64
	for i := range rs.nodes {
		node, err := rs.plainClient(i)
		if err != nil {
			return n, err
		}
		iter := node.Scan(ctx, 0, rs.prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			n++
			node.Del(ctx, iter.Val())
		}
		err = iter.Err()
		node.Close()
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// close closes the clients and kills the spawned processes.
func (rs *redisSet) close(_ context.Context) {
	rs.mu.Lock()
	for _, c := range rs.clients {
		_ = c.Close()
	}
	rs.clients = nil
	rs.mu.Unlock()
	for _, p := range rs.procs {
		p.Kill()
	}
	if rs.dir != "" {
		_ = os.RemoveAll(rs.dir)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lockHook counts the lock commands the dispatchers send: SET NX (an acquire attempt on one node;
// nil means another holder had the key) and the scripts that release and extend. A lock call sends
// each command alone; the Locker's janitor sends its compare-and-deletes in pipelines, where a
// command is counted as one command and its time is its pipeline's.
type lockHook struct {
	setNX, setNXTaken, scripts, errs atomic.Int64
	setNXTime, scriptTime            atomic.Int64 // nanoseconds
	// Round trips that carried the lock commands: pipelines, and commands sent alone.
	pipelines, alone atomic.Int64
}

func (h *lockHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lockHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		d := int64(time.Since(start))
		locks := 0
		for _, cmd := range cmds {
			locks += h.count(cmd, cmd.Err(), d)
		}
		if locks > 0 {
			h.pipelines.Add(1)
		}
		return err
	}
}

func (h *lockHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		h.alone.Add(int64(h.count(cmd, err, int64(time.Since(start)))))
		return err
	}
}

// count records one command that took d nanoseconds (its pipeline's time, if pipelined), and
// returns 1 if it was a lock command, else 0.
func (h *lockHook) count(cmd redis.Cmder, err error, d int64) int {
	if err != nil && !errors.Is(err, redis.Nil) {
		h.errs.Add(1)
	}
	switch cmd.Name() {
	case "set":
		h.setNX.Add(1)
		h.setNXTime.Add(d)
		if b, ok := cmd.(*redis.BoolCmd); ok && err == nil && !b.Val() {
			h.setNXTaken.Add(1)
		}
		return 1
	case "evalsha", "eval":
		h.scripts.Add(1)
		h.scriptTime.Add(d)
		return 1
	}
	return 0
}
