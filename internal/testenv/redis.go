package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisCleanupTimeout bounds deleting a test's keys on all nodes.
const redisCleanupTimeout = 30 * time.Second

// Redis is the test Redis nodes as seen by one test: a client per node and a key prefix that no
// other test uses. The nodes are independent (Redlock-style), not a cluster.
type Redis struct {
	// Addrs are the nodes' host:port, in the order of Clients.
	Addrs []string
	// Clients has one client per node, with ContextTimeoutEnabled and 1 s dial, read and write
	// timeouts so that a dead or stopped node fails calls quickly instead of stalling them.
	Clients []*redis.Client
	// Prefix starts every key the test may use: jptest:<test name>:<random>:. Keys under it are
	// deleted when the test ends.
	Prefix string
}

// NewRedis returns clients for the test Redis nodes and a key prefix for t. When t ends, every
// key under the prefix is deleted on every node and the clients are closed. NewRedis fails t when
// no server is available (see the package documentation).
func NewRedis(t testing.TB) *Redis {
	t.Helper()
	nodes := redisNodes(t)
	r := &Redis{Prefix: redisPrefix(t.Name())}
	t.Cleanup(func() { r.cleanup(t) })
	for _, n := range nodes {
		opts, err := redisOptions(n)
		if err != nil {
			t.Fatal(err) // checked at discovery; kept for safety
		}
		r.Addrs = append(r.Addrs, opts.Addr)
		r.Clients = append(r.Clients, redis.NewClient(opts))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, c := range r.Clients {
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("testenv: Redis node %s: %v", r.Addrs[i], err)
		}
	}
	return r
}

// cleanup deletes the test's keys on every node, then closes the clients.
func (r *Redis) cleanup(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), redisCleanupTimeout)
	defer cancel()
	for i, c := range r.Clients {
		if err := deleteByPrefix(ctx, c, r.Prefix); err != nil {
			t.Errorf("testenv: delete keys %s* on %s: %v", r.Prefix, r.Addrs[i], err)
		}
		_ = c.Close()
	}
}

// deleteByPrefix unlinks every key that starts with prefix. The prefix is made of [a-z0-9_:]
// only, so it is also a MATCH pattern for exactly those keys.
func deleteByPrefix(ctx context.Context, c *redis.Client, prefix string) error {
	const batch = 500
	iter := c.Scan(ctx, 0, prefix+"*", batch).Iterator()
	keys := make([]string, 0, batch)
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		err := c.Unlink(ctx, keys...).Err()
		keys = keys[:0]
		return err
	}
	for iter.Next(ctx) {
		if keys = append(keys, iter.Val()); len(keys) == batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	return flush()
}
