package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River's own benchmark configuration (cmd/river/riverbench in River's repository), which drain and
// steady use: the client's fetch timings, the default queue's workers and the insert batch.
const (
	fetchCooldown     = 2 * time.Millisecond
	fetchPollInterval = 20 * time.Millisecond
	maxWorkers        = 2_000
	insertBatch       = 5_000
)

// schemaMarker is the comment the run puts on its schema: a schema that holds objects and not this
// comment was not made by a run, and is never dropped.
const schemaMarker = "river peer bench: dropped at the end of the run"

// cleanupTimeout bounds stopping the client and dropping the schema once the run's context ended.
const cleanupTimeout = 30 * time.Second

// session is one run: its schema, the pool in it, the River client and what the run counts.
type session struct {
	opts options
	log  io.Writer
	// app is the application_name of the client's and the producer's connections, unique to this
	// process, so that rate finds their backends in pg_stat_activity.
	app string
	// cfg is the pool's configuration, in the run's database.
	cfg *pgxpool.Config
	// dropDatabase drops rate's own database (nil for the others).
	dropDatabase func(context.Context)
	// watch times rate's jobs (nil for the others).
	watch  *latencyWatch
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	report *report
	led    ledger
	// completed counts the completion events, which River sends once the completer has committed a
	// job's completion: the equivalent of jobpipe's processed count.
	completed atomic.Int64
	// unexpected counts the events of jobs that failed or were cancelled: a no-op worker has none.
	unexpected  atomic.Int64
	unsubscribe func()
	started     bool
}

// benchArgs is the job: N is its index in the ledger.
type benchArgs struct {
	N int64 `json:"n"`
}

// Kind is the River job kind.
func (benchArgs) Kind() string { return "bench" }

// countingWorker does nothing but record its run in the ledger, as jobpipe's bench handlers do.
type countingWorker struct {
	river.WorkerDefaults[benchArgs]
	led *ledger
}

// Work records the run.
func (w *countingWorker) Work(_ context.Context, j *river.Job[benchArgs]) error {
	w.led.run(j.Args.N)
	return nil
}

// open connects, creates the schema afresh, applies River's migrations in it and makes the client.
func open(ctx context.Context, o options, log io.Writer) (*session, error) {
	s := &session{opts: o, log: log, report: &report{started: time.Now()},
		app: fmt.Sprintf("river peer bench %s %d", o.scenario, os.Getpid())}
	cfg, err := pgxpool.ParseConfig(o.databaseURL)
	if err != nil {
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	if o.scenario == "rate" {
		// rate reads its transactions in pg_stat_database, which counts a whole database's: in a
		// shared one, other clients' would count too.
		if s.dropDatabase, err = createDatabase(ctx, cfg.ConnConfig, o.schema, o.keep, log); err != nil {
			return nil, err
		}
		cfg.ConnConfig.Database = o.schema
		s.watch = newLatencyWatch(rateJobs(o.rate, o.duration))
	}
	if err := s.createSchema(ctx, cfg.ConnConfig.Copy()); err != nil {
		if s.dropDatabase != nil {
			s.dropDatabase(ctx)
		}
		return nil, err
	}
	s.cfg = cfg
	// River's bench makes its pool from the URL with pgx's defaults; only the schema is added.
	cfg.ConnConfig.RuntimeParams["search_path"] = o.schema
	cfg.ConnConfig.RuntimeParams["application_name"] = s.app
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		s.close(ctx)
		return nil, err
	}
	driver := riverpgxv5.New(s.pool)
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: logger})
	if err == nil {
		_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		s.close(ctx)
		return nil, fmt.Errorf("applying River's migrations in schema %s: %w", o.schema, err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &countingWorker{led: &s.led})
	river.AddWorker(workers, &timedWorker{s: s})
	pollInterval := fetchPollInterval
	if o.scenario == "rate" {
		pollInterval = 0 // River's default
	}
	s.client, err = river.NewClient(driver, &river.Config{
		FetchCooldown:     o.fetchCooldown,
		FetchPollInterval: pollInterval,
		Logger:            logger,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.workers}},
		Workers:           workers,
	})
	if err != nil {
		s.close(ctx)
		return nil, err
	}
	// A buffer larger than any backlog of completions, as River's bench sizes it: a dropped event
	// would leave a job uncounted and the run waiting.
	events, unsubscribe := s.client.SubscribeConfig(&river.SubscribeConfig{ChanSize: 200_000,
		Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled}})
	s.unsubscribe = unsubscribe
	go func() {
		for e := range events {
			if e.Kind == river.EventKindJobCompleted {
				s.completed.Add(1)
			} else {
				s.unexpected.Add(1)
			}
		}
	}()
	return s, nil
}

// createSchema drops and recreates the run's schema, refusing one that holds objects it did not make.
func (s *session) createSchema(ctx context.Context, cc *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return connectError(cc, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var comment *string
	var objects int
	err = conn.QueryRow(ctx, `SELECT obj_description(n.oid, 'pg_namespace'),
		(SELECT count(*) FROM pg_class c WHERE c.relnamespace = n.oid)
		FROM pg_namespace n WHERE n.nspname = $1`, s.opts.schema).Scan(&comment, &objects)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return err
	case objects > 0 && (comment == nil || *comment != schemaMarker):
		return fmt.Errorf("schema %s exists, holds %d objects and was not made by this bench: pick another --schema", s.opts.schema, objects)
	}
	name := pgx.Identifier{s.opts.schema}.Sanitize()
	if _, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE; CREATE SCHEMA "+name+
		"; COMMENT ON SCHEMA "+name+" IS '"+schemaMarker+"'"); err != nil {
		return fmt.Errorf("creating schema %s: %w", s.opts.schema, err)
	}
	return nil
}

// connectError says why PostgreSQL could not be reached and what to do about it.
func connectError(cc *pgx.ConnConfig, err error) error {
	addr := fmt.Sprintf("%s:%d", cc.Host, cc.Port)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Errorf("PostgreSQL at %s refused the connection: %s; check the user, password and database in --database-url or DATABASE_URL", addr, pe.Error())
	}
	cause := err.Error()
	var op *net.OpError
	if errors.As(err, &op) {
		cause = op.Err.Error()
	}
	return fmt.Errorf("PostgreSQL at %s is unreachable: %s; start it or point --database-url or DATABASE_URL at a running server", addr, cause)
}

// start starts the client.
func (s *session) start(ctx context.Context) error {
	if err := s.client.Start(ctx); err != nil {
		return fmt.Errorf("starting the River client: %w", err)
	}
	s.started = true
	return nil
}

// stop stops the client, which waits for its running jobs and flushes their completions, then
// closes the pool's connections: a backend publishes its table statistics when it exits, and
// otherwise up to seconds later, so the dead tuples read next would miss the run's updates, which
// jobpipe's bench reads once its dispatchers' pools are closed.
func (s *session) stop(ctx context.Context) error {
	if !s.started {
		return nil
	}
	s.started = false
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := s.client.Stop(ctx)
	s.pool.Reset()
	return err
}

// close stops the client, closes the pool and drops the schema (and rate's database) unless --keep.
func (s *session) close(ctx context.Context) {
	if s.dropDatabase != nil {
		defer s.dropDatabase(ctx)
	}
	if err := s.stop(ctx); err != nil {
		fmt.Fprintf(s.log, "river bench: stopping the client: %v\n", err)
	}
	if s.unsubscribe != nil {
		s.unsubscribe()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.opts.keep {
		fmt.Fprintf(s.log, "river bench: schema %s kept (--keep)\n", s.opts.schema)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var err error
	if s.cfg != nil { // else the schema was never created
		var conn *pgx.Conn
		if conn, err = pgx.ConnectConfig(ctx, s.cfg.ConnConfig.Copy()); err == nil {
			_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s.opts.schema}.Sanitize()+" CASCADE")
			conn.Close(ctx)
		}
	}
	if err != nil {
		fmt.Fprintf(s.log, "river bench: dropping schema %s: %v\n", s.opts.schema, err)
	}
}

// insert inserts jobs from to to-1 (their N) with InsertMany, insertBatch jobs per call, counting
// them in done as each call returns.
func (s *session) insert(ctx context.Context, from, to int64, done *atomic.Int64) error {
	batch := make([]river.InsertManyParams, 0, insertBatch)
	for start := from; start < to; start += insertBatch {
		batch = batch[:0]
		for n := start; n < min(to, start+insertBatch); n++ {
			batch = append(batch, river.InsertManyParams{Args: benchArgs{N: n}})
		}
		if _, err := s.client.InsertMany(ctx, batch); err != nil {
			return fmt.Errorf("inserting jobs %d to %d: %w", start, start+int64(len(batch))-1, err)
		}
		done.Add(int64(len(batch)))
	}
	return nil
}

// analyze gathers river_job's statistics after a bulk load, as jobpipe's bench does for its tables.
func (s *session) analyze(ctx context.Context) error {
	if s.opts.noAnalyze {
		return nil
	}
	_, err := s.pool.Exec(ctx, "ANALYZE river_job")
	return err
}

// stallTimeout is how long a run waits without a completion before it gives up waiting and goes on
// to its accounting, which then reports the jobs left as lost.
const stallTimeout = time.Minute

// waitCompleted waits until want jobs have completed. When none completes for stallTimeout, it
// records a failure and returns, so the run still checks and reports every job.
func (s *session) waitCompleted(ctx context.Context, want int64) error {
	last, lastAt := s.completed.Load(), time.Now()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		c := s.completed.Load()
		switch {
		case c >= want:
			return nil
		case c != last:
			last, lastAt = c, time.Now()
		case time.Since(lastAt) > stallTimeout:
			s.report.fail("no job completed for %v with %d of %d left: gave up waiting", stallTimeout, want-c, want)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting for %d jobs to complete: %w", want, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// settings records what the figures depend on.
func (s *session) settings(ctx context.Context) {
	r := s.report
	r.setting("date", r.started.UTC().Format(time.RFC3339))
	r.setting("river", moduleVersion("github.com/riverqueue/river"))
	r.setting("pgx", moduleVersion("github.com/jackc/pgx/v5"))
	r.setting("go", runtime.Version())
	r.setting("cpus", runtime.NumCPU())
	r.setting("schema", s.opts.schema)
	for _, name := range []string{"server_version", "shared_buffers", "synchronous_commit", "fsync", "autovacuum", "max_connections"} {
		var v string
		if err := s.pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err == nil {
			r.setting("pg_"+name, v)
		}
	}
	r.setting("max_workers", s.opts.workers)
	r.setting("fetch_cooldown", s.opts.fetchCooldown.String())
	if s.opts.scenario == "rate" {
		r.setting("fetch_poll_interval", river.FetchPollIntervalDefault.String()+" (River's default)")
		r.setting("rate", s.opts.rate)
		r.setting("duration", s.opts.duration.String())
		r.setting("handler", s.opts.handler.String())
		r.setting("insert_callers", rateCallers(s.opts.rate))
		r.setting("insert", "InsertTx and commit, one job per transaction, on a connection per caller")
		r.setting("payload_bytes", ratePayloadBytes)
		r.setting("database", s.cfg.ConnConfig.Database+" (the run's own)")
		r.setting("application_name", s.app)
	} else {
		r.setting("fetch_poll_interval", fetchPollInterval.String())
		r.setting("insert_batch", insertBatch)
	}
	r.setting("pool_max_conns", s.pool.Config().MaxConns)
	if s.opts.scenario != "rate" { // rate loads nothing before it starts
		r.setting("analyze_after_load", !s.opts.noAnalyze)
	}
}

// moduleVersion is the version of a module the binary was built with.
func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return "unknown"
}
