package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// postgresFinder finds PostgreSQL: TEST_DATABASE_URL, the local default, a container.
var postgresFinder = finder[string]{
	service: "PostgreSQL",
	envVar:  envDatabaseURL,
	env: func(ctx context.Context) (string, bool, error) {
		u := strings.TrimSpace(os.Getenv(envDatabaseURL))
		if u == "" {
			return "", false, fmt.Errorf("%s is not set", envDatabaseURL)
		}
		return u, true, pingPostgres(ctx, u)
	},
	local: func(ctx context.Context) (string, error) {
		return localPostgresURL, pingPostgres(ctx, localPostgresURL)
	},
	start: startPostgresContainer,
	show:  redact,
}

// redisFinder finds Redis nodes: TEST_REDIS_URL, the local default, a container.
var redisFinder = finder[[]string]{
	service: "Redis",
	envVar:  envRedisURL,
	env: func(ctx context.Context) ([]string, bool, error) {
		list := strings.TrimSpace(os.Getenv(envRedisURL))
		if list == "" {
			return nil, false, fmt.Errorf("%s is not set", envRedisURL)
		}
		nodes, err := splitRedisList(list)
		if err != nil {
			return nil, true, err
		}
		return nodes, true, pingRedisNodes(ctx, nodes)
	},
	local: func(ctx context.Context) ([]string, error) {
		nodes := []string{localRedisAddr}
		return nodes, pingRedisNodes(ctx, nodes)
	},
	start: startRedisContainer,
	show: func(nodes []string) string {
		shown := make([]string, len(nodes))
		for i, n := range nodes {
			shown[i] = redactRedis(n)
		}
		return strings.Join(shown, ",")
	},
}

// pingPostgres connects to connString and runs a query, within ctx.
func pingPostgres(ctx context.Context, connString string) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return fmt.Errorf("%s: %w", redact(connString), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("%s: %w", redact(connString), err)
	}
	return nil
}

// pingRedisNodes sends PING to every node, within ctx.
func pingRedisNodes(ctx context.Context, nodes []string) error {
	var errs []error
	for _, n := range nodes {
		opts, err := redisOptions(n)
		if err != nil {
			return err
		}
		c := redis.NewClient(opts)
		if err := c.Ping(ctx).Err(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", redactRedis(n), err))
		}
		_ = c.Close()
	}
	return errors.Join(errs...)
}
