package testenv

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// redisTimeout bounds dialling and every read and write. go-redis's defaults (5 s reads that
// ignore the context) would let one stopped node stall a Redlock call for seconds, where the fault
// suite wants a stalled node's lock calls to fail within their call timeout.
const redisTimeout = time.Second

// splitRedisList splits TEST_REDIS_URL into one entry per node and checks each.
func splitRedisList(list string) ([]string, error) {
	var nodes []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if _, err := redisOptions(n); err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("testenv: %s names no Redis node", envRedisURL)
	}
	return nodes, nil
}

// redisOptions returns fresh client options for one node, given as host:port or as a redis:// or
// rediss:// URL (password and database number included), with this package's timeouts.
// Fresh each time because go-redis fills in the options it is given.
func redisOptions(node string) (*redis.Options, error) {
	var opts *redis.Options
	if strings.Contains(node, "://") {
		o, err := redis.ParseURL(node)
		if err != nil {
			return nil, fmt.Errorf("testenv: Redis node %q: %w", node, err)
		}
		opts = o
	} else {
		host, port, err := net.SplitHostPort(node)
		if err != nil {
			return nil, fmt.Errorf("testenv: Redis node %q: want host:port or redis://host:port[/db]: %w", node, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 || host == "" {
			return nil, fmt.Errorf("testenv: Redis node %q: want host:port with a port number", node)
		}
		opts = &redis.Options{Addr: node}
	}
	return withTestTimeouts(opts), nil
}

// withTestTimeouts makes a client fail fast instead of hanging on a dead or stopped node.
func withTestTimeouts(opts *redis.Options) *redis.Options {
	opts.ContextTimeoutEnabled = true
	opts.DialTimeout = redisTimeout
	opts.ReadTimeout = redisTimeout
	opts.WriteTimeout = redisTimeout
	// Maintenance notifications are a Redis Enterprise/Cloud feature; in "auto" mode every new
	// connection asks for them and logs the refusal of servers without them.
	opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return opts
}

// redactRedis hides the password of a Redis node for logs.
func redactRedis(node string) string {
	if !strings.Contains(node, "://") {
		return node
	}
	return redact(node)
}
