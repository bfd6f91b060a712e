package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/internal/heads"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

// schemaMarker is the comment a run puts on its schema: a schema that has tables and not this comment
// was not made by a run, and is never dropped.
const schemaMarker = "jobpipe bench: dropped at the end of the run"

// cleanupTimeout bounds dropping the schema and stopping dispatchers after the run's context ended.
const cleanupTimeout = 30 * time.Second

// session is one run's world: its schema, its own pool (setup, inserts, checks), the tracer on the
// dispatchers' pools, and the Redis nodes when the scenario needs them.
type session struct {
	opts Options
	// app is the application_name of the run's dispatchers and enqueue callers, unique to this
	// process, so that the rate scenario finds their backends in pg_stat_activity; the bench's own
	// pool adds " (bookkeeping)" to it.
	app    string
	report *Report
	db     *pgxpool.Pool
	trace  *tracer
	redis  *redisSet
	logger *slog.Logger
	// guard holds the schema's advisory lock for the run (see claimSchema).
	guard *pgx.Conn
}

// open creates the run's schema afresh and applies jobpipe's migrations to it.
func open(ctx context.Context, o Options, r *Report) (*session, error) {
	s := &session{opts: o, report: r, trace: newTracer(), app: fmt.Sprintf("jobpipe bench %s %d", o.Scenario, os.Getpid()),
		logger: slog.New(slog.NewTextHandler(o.Log, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if err := s.claimSchema(ctx); err != nil {
		return nil, err
	}
	if err := s.createSchema(ctx); err != nil {
		s.releaseSchema(ctx)
		return nil, err
	}
	cfg := s.config(DefaultPool)
	cfg.ConnConfig.Tracer = nil
	cfg.ConnConfig.RuntimeParams["application_name"] = s.app + " (bookkeeping)"
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		s.dropSchema(ctx)
		s.releaseSchema(ctx)
		return nil, err
	}
	s.db = db
	if err := migrations.Up(ctx, db); err != nil {
		s.close(ctx)
		return nil, fmt.Errorf("applying jobpipe's migrations: %w", err)
	}
	return s, nil
}

// config returns a copy of the connection configuration in the run's schema, with maxConns
// connections and the statement tracer.
func (s *session) config(maxConns int) *pgxpool.Config {
	cfg := s.opts.DB.Copy()
	cfg.ConnConfig.RuntimeParams["search_path"] = s.opts.Schema
	cfg.ConnConfig.RuntimeParams["application_name"] = s.app
	cfg.ConnConfig.Tracer = s.trace
	cfg.MaxConns = int32(maxConns)
	return cfg
}

// schemaLockSQL takes the advisory lock that marks the schema $1 as used by a run.
const schemaLockSQL = "SELECT pg_try_advisory_lock(hashtextextended('jobpipe bench ' || $1, 0))"

// claimSchema takes the schema's advisory lock on a connection of its own, held until the run ends. A
// second run on the same schema would drop the first's tables under it, and both would then report
// jobs lost or run twice, so it is refused instead.
func (s *session) claimSchema(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, s.opts.DB.ConnConfig.Copy())
	if err != nil {
		return err
	}
	var got bool
	if err := conn.QueryRow(ctx, schemaLockSQL, s.opts.Schema).Scan(&got); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("locking schema %s: %w", s.opts.Schema, err)
	}
	if !got {
		conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("schema %s is in use by another jobpipe bench run: wait for it to end, or give this run another --schema", s.opts.Schema)
	}
	s.guard = conn
	return nil
}

// releaseSchema ends the connection that holds the schema's advisory lock, which releases it.
func (s *session) releaseSchema(ctx context.Context) {
	if s.guard != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = s.guard.Close(ctx)
		s.guard = nil
	}
}

// createSchema creates the schema afresh on the connection that holds its advisory lock.
func (s *session) createSchema(ctx context.Context) error {
	conn := s.guard
	var comment *string
	var objects int
	err := conn.QueryRow(ctx, `SELECT obj_description(n.oid, 'pg_namespace'),
		(SELECT count(*) FROM pg_class c WHERE c.relnamespace = n.oid)
		FROM pg_namespace n WHERE n.nspname = $1`, s.opts.Schema).Scan(&comment, &objects)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return err
	case objects > 0 && (comment == nil || *comment != schemaMarker):
		return fmt.Errorf("schema %s exists, holds %d objects and was not made by jobpipe bench: pick another --schema", s.opts.Schema, objects)
	}
	name := pgx.Identifier{s.opts.Schema}.Sanitize()
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE; CREATE SCHEMA "+name+
		"; COMMENT ON SCHEMA "+name+" IS '"+schemaMarker+"'")
	if err != nil {
		return fmt.Errorf("creating schema %s: %w", s.opts.Schema, err)
	}
	return nil
}

func (s *session) dropSchema(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, s.opts.DB.ConnConfig.Copy())
	if err == nil {
		_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s.opts.Schema}.Sanitize()+" CASCADE")
		conn.Close(ctx)
	}
	if err != nil {
		fmt.Fprintf(s.opts.Log, "bench: dropping schema %s: %v\n", s.opts.Schema, err)
	}
}

// close drops the schema unless Keep, closes the pool and the Redis clients, and kills spawned nodes.
func (s *session) close(ctx context.Context) {
	if s.db != nil {
		s.db.Close()
	}
	if s.redis != nil {
		s.redis.close(ctx)
	}
	defer s.releaseSchema(ctx)
	if s.opts.Keep {
		fmt.Fprintf(s.opts.Log, "bench: schema %s kept (--keep)\n", s.opts.Schema)
		return
	}
	s.dropSchema(ctx)
}

// createKind defines the kind name from T and creates its table through the public table generator.
func createKind[T any](ctx context.Context, s *session, name string, opts ...jobinfo.Option) (*jobinfo.Kind[T], error) {
	kind, err := jobinfo.Define[T](name, opts...)
	if err != nil {
		return nil, err
	}
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		return nil, err
	}
	if _, err := s.db.Exec(ctx, ddl); err != nil {
		return nil, fmt.Errorf("creating the table of kind %s: %w", name, err)
	}
	return kind, nil
}

// connectRedis opens the lock nodes the options name or spawn.
func (s *session) connectRedis(ctx context.Context) error {
	rs, err := openRedis(ctx, s.opts.RedisNodes, s.opts.SpawnRedis, s.opts.Schema)
	if err != nil {
		return err
	}
	s.redis = rs
	return nil
}

// truncate empties a kind's table and restarts its ids, between the rounds of a sweep.
func (s *session) truncate(ctx context.Context, table pgx.Identifier) error {
	_, err := s.db.Exec(ctx, "TRUNCATE "+table.Sanitize()+" RESTART IDENTITY")
	return err
}

// analyze gathers the planner's statistics of a freshly loaded table, as autovacuum's auto-analyze
// would on a stock server shortly after a bulk load (the settings record whether autovacuum is on);
// --no-analyze leaves the table as loaded.
func (s *session) analyze(ctx context.Context, table pgx.Identifier, vacuum bool) error {
	if s.opts.NoAnalyze {
		return nil
	}
	stmt := "ANALYZE "
	if vacuum {
		stmt = "VACUUM (ANALYZE) "
	}
	_, err := s.db.Exec(ctx, stmt+table.Sanitize())
	return err
}

// prepareKeyed readies a loaded keyed kind's table for a run: its statistics gathered, and the
// dispatcher's head queries named in the statement trace.
func (s *session) prepareKeyed(ctx context.Context, info *jobinfo.Info) error {
	if err := s.analyze(ctx, info.Table, false); err != nil {
		return err
	}
	fast, scan := heads.Queries(info)
	s.trace.name(fast, "select heads: fast walk (keyed)")
	s.trace.name(scan, "select heads: key scan (keyed)")
	return nil
}

// waitFor polls cond every interval until it holds, ctx ends, or timeout passes.
func waitFor(ctx context.Context, what string, timeout, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %v waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting for %s: %w", what, context.Cause(ctx))
		case <-time.After(interval):
		}
	}
}
