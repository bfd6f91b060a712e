package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/internal/demo"
	"github.com/jobpipe/jobpipe/jobinfo"
)

const demoUsage = `usage: jobpipe demo [--database-url URL] [--redis-url NODES] [--schema NAME] [--jobs N]

Runs the demo pipeline in its own schema (dropped and created afresh each run): five kinds that tell
the users' stories (webhook deliveries limited per customer, blog changes one at a time and in order
per blog, scheduled reminders, an import that fails twice then succeeds, a poison report), about N jobs
with duplicates among them, two dispatchers working them with live progress, and a summary the demo
checks itself: duplicates refused, no key over its limit, per-key order kept, retries and failures as
configured, nothing lost, no scheduled job early. It exits 1 if any promise failed.

flags:
  --database-url URL  the database (default $DATABASE_URL, else ` + defaultDatabaseURL + `)
  --redis-url NODES   Redis lock nodes, comma-separated (default $REDIS_URL, else ` + defaultRedisURL + `)
  --schema NAME       the schema the demo owns (default jobpipe_demo)
  --jobs N            about how many jobs to enqueue (default 5000, at least 100)
  --verbose           print the dispatchers' logs (claims refused, locks not granted, rescues)
`

func init() {
	register(&command{name: "demo", summary: "run the demo pipeline and print its checked summary", usage: demoUsage, run: runDemo})
}

func runDemo(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	dbURL := databaseURLFlag(fs)
	redisURL := redisNodesFlag(fs)
	schema := fs.String("schema", "jobpipe_demo", "the schema the demo owns")
	jobs := fs.Int("jobs", 5000, "about how many jobs to enqueue")
	verbose := fs.Bool("verbose", false, "print the dispatchers' logs")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q; demo takes only flags", pos[0])
	}
	if err := jobinfo.ValidateName("schema", *schema); err != nil {
		return &usageError{err: err}
	}
	if *jobs < 100 {
		return usagef("--jobs %d is too few: give at least 100", *jobs)
	}
	db, err := e.demoSchema(ctx, *dbURL, *schema)
	if err != nil {
		return err
	}
	defer db.Close()
	nodes, err := e.redisNodes(ctx, *redisURL)
	if err != nil {
		return err
	}
	defer closeAll(nodes)
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	_, err = demo.Run(ctx, demo.Config{DB: db, Redis: nodes, RedisPrefix: "jobpipe_demo:" + hex.EncodeToString(suffix) + ":",
		Jobs: *jobs, Out: e.Stdout, Logger: demoLogger(e, *verbose)})
	return err
}

// demoLogger shows the dispatchers' debug logs with --verbose, and their warnings otherwise.
func demoLogger(e *env, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(e.Stderr, &slog.HandlerOptions{Level: level}))
}

// demoSchema drops and creates the demo's schema and returns a pool whose search_path is that schema.
func (e *env) demoSchema(ctx context.Context, flagValue, schema string) (*pgxpool.Pool, error) {
	admin, err := e.connect(ctx, flagValue)
	if err != nil {
		return nil, err
	}
	cfg := admin.Config()
	s := pgx.Identifier{schema}.Sanitize()
	_, err = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+s+" CASCADE; CREATE SCHEMA "+s)
	admin.Close()
	if err != nil {
		return nil, fmt.Errorf("demo: creating schema %s: %w", schema, err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = max(cfg.MaxConns, 16)
	return pgxpool.NewWithConfig(ctx, cfg)
}
