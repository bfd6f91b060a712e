package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/jobpipe/jobpipe/execlock"
)

// defaultRedisURL is a local Redis: the fallback when neither --redis-url nor REDIS_URL is given.
const defaultRedisURL = "127.0.0.1:6379"

// redisNodesFlag defines --redis-url on fs: the lock nodes, comma-separated.
func redisNodesFlag(fs *flag.FlagSet) *string {
	return fs.String("redis-url", "", "Redis lock nodes, comma-separated host:port or redis:// URLs (default $REDIS_URL, else "+defaultRedisURL+")")
}

// redisNodes connects to the lock nodes chosen by flagValue, else $REDIS_URL, else the default, and
// checks that each answers. The caller closes the clients.
func (e *env) redisNodes(ctx context.Context, flagValue string) ([]*redis.Client, error) {
	value, from := flagValue, "--redis-url"
	if value == "" {
		value, from = e.Getenv("REDIS_URL"), "REDIS_URL"
	}
	if value == "" {
		value, from = defaultRedisURL, "the default"
	}
	clients, err := execlock.NewClients(strings.Split(value, ",")...)
	if err != nil {
		return nil, fmt.Errorf("the Redis nodes (from %s) are malformed: %w", from, err)
	}
	for _, c := range clients {
		if err := c.Ping(ctx).Err(); err != nil {
			closeAll(clients)
			return nil, fmt.Errorf("the Redis node at %s does not answer (from %s): %v; start Redis at %s or point --redis-url or REDIS_URL at running nodes",
				c.Options().Addr, from, err, c.Options().Addr)
		}
	}
	return clients, nil
}

func closeAll(clients []*redis.Client) {
	for _, c := range clients {
		_ = c.Close()
	}
}
