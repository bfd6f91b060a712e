package testenv

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/migrations"
)

// ExampleSchema gives a runnable Example, which has no *testing.T, what NewSchema gives a test: a
// schema of its own on the test server, with jobpipe's migrations applied, and a pool whose
// connections use it. It also returns the Redis nodes' addresses. drop closes the pool and drops
// the schema.
func ExampleSchema(ctx context.Context) (pool *pgxpool.Pool, redisNodes []string, drop func(), err error) {
	url, nodes, err := Servers()
	if err != nil {
		return nil, nil, nil, err
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, nil, nil, err
	}
	schema := fmt.Sprintf("example_%d", time.Now().UnixNano())
	drop = func() {
		if pool != nil {
			pool.Close()
		}
		_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_ = admin.Close(ctx)
	}
	defer func() {
		if err != nil {
			drop()
		}
	}()
	if _, err = admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, nil, nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	if pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, nil, nil, err
	}
	if err = migrations.Up(ctx, pool); err != nil {
		return nil, nil, nil, err
	}
	return pool, nodes, drop, nil
}
