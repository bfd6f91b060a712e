package faultkit

// The worker process mode. The multi-process tests re-execute this test binary with WorkerModeEnv set;
// TestMain then calls RunWorker instead of running tests. A worker is one jobpipe dispatcher working
// one keyed kind, configured from environment variables, whose handler writes what it sees to a
// ledger table in the test's schema. It runs until SIGTERM, then stops gracefully and exits 0.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/backoff"
	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/execlock"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// Environment of a worker process. WorkerModeEnv=1 selects the worker mode; the others configure it.
const (
	WorkerModeEnv  = "JOBPIPE_TEST_WORKER"
	envDatabaseURL = "JPW_DATABASE_URL"   // connection string; its search_path is the test's schema
	envRedis       = "JPW_REDIS"          // lock nodes, comma-separated host:port
	envPrefix      = "JPW_REDIS_PREFIX"   // lock key prefix
	envKind        = "JPW_KIND"           // kind name (= table name) of KeyedJob
	envNode        = "JPW_NODE"           // dispatcher node name
	envSleepMin    = "JPW_SLEEP_MIN"      // handler sleep, lower bound (duration)
	envSleepMax    = "JPW_SLEEP_MAX"      // handler sleep, upper bound (duration)
	envBlockIDs    = "JPW_BLOCK_IDS"      // job ids whose handler blocks, comma-separated
	envBlockBlogs  = "JPW_BLOCK_BLOGS"    // blog ids whose jobs' handlers block, comma-separated
	envBlockUpTo   = "JPW_BLOCK_ATTEMPTS" // block only attempts <= this (0: every attempt)
	envLeaseTTL    = "JPW_LEASE_TTL"      // dispatcher.Config.LeaseTTL
	envRescue      = "JPW_RESCUE"         // dispatcher.Config.RescueInterval
	envLeaderTTL   = "JPW_LEADER_TTL"     // dispatcher.Config.LeaderTTL
	envPoll        = "JPW_POLL"           // dispatcher.Config.PollInterval
	envConcurrency = "JPW_CONCURRENCY"    // dispatcher.Config.Concurrency
	envKeyRunJobs  = "JPW_KEY_RUN_JOBS"   // dispatcher.Config.KeyRunJobs
	envRetryDelay  = "JPW_RETRY_DELAY"    // the kind's constant backoff
	envKeyLimit    = "JPW_KEY_LIMIT"      // the kind's static jobinfo.KeyLimit (0 or unset: the default, 1)
)

// Lines a worker writes on its stdout for the test: readyLine once its dispatcher has started,
// StatsSummary followed by the dispatcher's Stats as JSON once it has stopped.
const (
	readyLine = "JPW-READY"
	statsLine = "JPW-STATS "
)

// Tables of the test's schema that the workers use besides the kind's own.
const (
	// ledgerDDL: one row per handler call, inserted when the handler starts and completed (ended_at,
	// outcome) when it returns. kind is NULL for the keyed kind's calls and names the kind of a
	// worker extra's (see workerExtras). Both writes are autocommitted on a pool of their own, outside any job
	// transaction, so a start stays visible when the worker is killed afterwards. running is how many
	// handlers of the job's blog ran, this one included, right after it started (from mp_conc).
	ledgerDDL = `CREATE TABLE mp_ledger (
	n bigserial PRIMARY KEY,
	job_id bigint NOT NULL,
	blog_id bigint NOT NULL,
	seq bigint NOT NULL,
	attempt int NOT NULL,
	token bigint NOT NULL,
	slot int NOT NULL,
	pid int NOT NULL,
	node text NOT NULL,
	started_at timestamptz NOT NULL,
	ended_at timestamptz,
	outcome text,
	running int,
	kind text)`
	// releaseDDL: a blocking handler returns once its job's id is inserted here.
	releaseDDL = `CREATE TABLE mp_release (job_id bigint PRIMARY KEY)`
	// concDDL: per blog, the handlers running now across every process, the most ever seen at once,
	// the slots they hold, and how often a handler started in a slot another running handler held.
	// Updated in the same autocommitted statements as the ledger; the row lock makes the counts exact.
	concDDL = `CREATE TABLE mp_conc (
	blog_id bigint PRIMARY KEY,
	running int NOT NULL,
	max_seen int NOT NULL,
	slots int[] NOT NULL,
	slot_clashes int NOT NULL)`
)

// The handler's two ledger writes. A start counts the handler in mp_conc and records the count with
// the ledger row; an end uncounts it and completes the row. One statement each, so that retryUnsent's
// "surely did not reach the server" keeps both exact.
const (
	ledgerStartSQL = `WITH c AS (
	INSERT INTO mp_conc AS c (blog_id, running, max_seen, slots, slot_clashes) VALUES ($2, 1, 1, ARRAY[$6::int], 0)
	ON CONFLICT (blog_id) DO UPDATE SET running = c.running + 1, max_seen = greatest(c.max_seen, c.running + 1),
		slots = c.slots || $6::int, slot_clashes = c.slot_clashes + (($6::int = ANY (c.slots))::int)
	RETURNING c.running)
INSERT INTO mp_ledger (job_id, blog_id, seq, attempt, token, slot, pid, node, started_at, running, kind)
SELECT $1, $2, $3, $4, $5, $6::int, $7, $8, clock_timestamp(), c.running, $9 FROM c
RETURNING n`
	ledgerEndSQL = `WITH c AS (
	UPDATE mp_conc SET running = running - 1, slots = array_remove(slots, $4::int) WHERE blog_id = $3)
UPDATE mp_ledger SET ended_at = clock_timestamp(), outcome = $2 WHERE n = $1`
)

// KeyedJob is the data of the multi-process tests' kind: at most the kind's key limit of jobs per blog
// run at once (1 unless a test sets JPW_KEY_LIMIT or a dynamic limit), and seq numbers a blog's jobs
// in the order they were enqueued.
type KeyedJob struct {
	BlogID int64 `jobpipe:"blog_id,key"`
	Seq    int64 `jobpipe:"seq"`
}

// defineKeyedKind defines the kind the test and its workers share. retryDelay is the constant backoff,
// which the rescuer also applies to a job whose lease expired; keyLimit is the static per-key running
// limit (0: the default, 1).
func defineKeyedKind(name string, retryDelay time.Duration, keyLimit int) (*jobinfo.Kind[KeyedJob], error) {
	opts := []jobinfo.Option{jobinfo.MaxAttempts(5), jobinfo.Backoff(backoff.Constant(retryDelay))}
	if keyLimit != 0 {
		opts = append(opts, jobinfo.KeyLimit(keyLimit))
	}
	return jobinfo.Define[KeyedJob](name, opts...)
}

// DefaultRetryDelay is the kind's backoff unless a test sets JPW_RETRY_DELAY.
const DefaultRetryDelay = 200 * time.Millisecond

// RunWorker is the worker process's main. It returns the exit code: 0 after a clean SIGTERM shutdown,
// 1 when Stop failed, 2 when the worker could not start.
func RunWorker() int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fail := func(format string, args ...any) int {
		logger.Error(fmt.Sprintf(format, args...))
		return 2
	}
	env := func(key string) string { return strings.TrimSpace(os.Getenv(key)) }
	dur := func(key string, def time.Duration) (time.Duration, error) {
		v := env(key)
		if v == "" {
			return def, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("%s=%q: %w", key, v, err)
		}
		return d, nil
	}
	var errs []error
	must := func(d time.Duration, err error) time.Duration {
		if err != nil {
			errs = append(errs, err)
		}
		return d
	}
	sleepMin := must(dur(envSleepMin, 0))
	sleepMax := must(dur(envSleepMax, 0))
	leaseTTL := must(dur(envLeaseTTL, 0))
	rescue := must(dur(envRescue, 0))
	leaderTTL := must(dur(envLeaderTTL, 0))
	poll := must(dur(envPoll, 0))
	retryDelay := must(dur(envRetryDelay, DefaultRetryDelay))
	ids := func(key string) map[int64]bool {
		set := map[int64]bool{}
		for _, f := range strings.Split(env(key), ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %q: %w", key, f, err))
			}
			set[id] = true
		}
		return set
	}
	blockIDs, blockBlogs := ids(envBlockIDs), ids(envBlockBlogs)
	integer := func(key string) int {
		v := env(key)
		if v == "" {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", key, v, err))
		}
		return n
	}
	blockUpTo := integer(envBlockUpTo)
	keyLimit := integer(envKeyLimit)
	keyRunJobs := integer(envKeyRunJobs)
	concurrency := 4
	if n := integer(envConcurrency); n != 0 {
		concurrency = n
	}
	if len(errs) > 0 {
		return fail("worker: bad settings: %v", errs)
	}
	if sleepMax < sleepMin {
		return fail("worker: %s %v < %s %v", envSleepMax, sleepMax, envSleepMin, sleepMin)
	}
	dbURL, nodes, node := env(envDatabaseURL), env(envRedis), env(envNode)
	if dbURL == "" || nodes == "" || node == "" || env(envKind) == "" {
		return fail("worker: %s, %s, %s and %s are required", envDatabaseURL, envRedis, envNode, envKind)
	}
	kind, err := defineKeyedKind(env(envKind), retryDelay, keyLimit)
	if err != nil {
		return fail("worker: %v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// A worker never outlives its test: should the test process die without its cleanups, the
	// worker is re-parented, and exits at once.
	go func(parent int) {
		for range time.Tick(200 * time.Millisecond) {
			if os.Getppid() != parent {
				logger.Error("worker: the test process is gone; exiting")
				os.Exit(3)
			}
		}
	}(os.Getppid())

	// The dispatcher's pool, and a small one of the ledger's own so that the ledger's writes never
	// wait behind claims and heartbeats (or delay them).
	newPool := func(size int32) (*pgxpool.Pool, error) {
		cfg, err := pgxpool.ParseConfig(dbURL)
		if err != nil {
			return nil, err
		}
		cfg.MaxConns = size
		return pgxpool.NewWithConfig(ctx, cfg)
	}
	// Small pools: the tests share one PostgreSQL server (max_connections is often 100) with other
	// tests, and a worker's running jobs hold no connection.
	db, err := newPool(3)
	if err != nil {
		return fail("worker: dispatcher pool: %v", err)
	}
	defer db.Close()
	ledger, err := newPool(2)
	if err != nil {
		return fail("worker: ledger pool: %v", err)
	}
	defer ledger.Close()
	clients, err := execlock.NewClients(strings.Split(nodes, ",")...)
	if err != nil {
		return fail("worker: %v", err)
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()

	// The dispatcher's own pool holds 2 connections, the least it takes and enough for a worker's
	// load here: a storm of terminated backends (fault scenario 10) ends every connection, each is
	// dialled again, and on a small machine each new backend costs a share of its CPU.
	d, err := dispatcher.New(dispatcher.Config{
		DB: db, DispatcherConns: 2, Redis: clients, RedisPrefix: env(envPrefix), NodeName: node,
		Concurrency: concurrency, LeaseTTL: leaseTTL, PollInterval: poll,
		RescueInterval: rescue, LeaderTTL: leaderTTL, Logger: logger, KeyRunJobs: keyRunJobs,
	})
	if err != nil {
		return fail("worker: %v", err)
	}
	host := &workerHost{D: d, DB: db, Ledger: ledger, Logger: logger, Node: node, Pid: os.Getpid(), Env: env,
		behaviour: behaviour{sleepMin: sleepMin, sleepMax: sleepMax, blockIDs: blockIDs, blockBlogs: blockBlogs, blockUpTo: blockUpTo}}
	handler := func(jctx context.Context, j *dispatcher.Job[KeyedJob]) error {
		return host.Handle(jctx, handlerCall{JobID: j.ID, BlogID: j.Data.BlogID, Seq: j.Data.Seq, Attempt: j.Attempt, Token: j.Token, Slot: j.Slot})
	}
	if err := dispatcher.Register(d, kind, handler); err != nil {
		return fail("worker: %v", err)
	}
	for _, extra := range workerExtras {
		if err := extra(host); err != nil {
			return fail("worker: %v", err)
		}
	}
	startCtx, cancelStart := context.WithTimeout(ctx, 30*time.Second)
	// Start fails, and may be called again, when the shared server refuses a connection for a moment.
	err = retryUnsent(startCtx, func() error { return d.Start(startCtx) })
	cancelStart()
	if err != nil {
		return fail("worker: Start: %v", err)
	}
	fmt.Println(readyLine)

	<-ctx.Done()
	began := time.Now()
	stopCtx, cancelStop := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelStop()
	code := 0
	if err := d.Stop(stopCtx); err != nil {
		logger.Error("worker: Stop", "err", err)
		code = 1
	}
	st, _ := json.Marshal(d.Stats())
	fmt.Println(statsLine + string(st))
	logger.Info("worker: stopped", "node", node, "in", time.Since(began).Round(time.Millisecond), "stats", string(st))
	return code
}

// workerHost is what a worker extra (see workerExtras) gets to work with.
type workerHost struct {
	D      *dispatcher.Dispatcher
	DB     *pgxpool.Pool // the dispatcher's pool
	Ledger *pgxpool.Pool // the ledger's own pool
	Logger *slog.Logger
	Node   string
	Pid    int
	Env    func(key string) string // the worker's environment, trimmed

	behaviour behaviour
}

// RetryDelay is the worker's JPW_RETRY_DELAY, the constant backoff of its kinds, or the default.
func (h *workerHost) RetryDelay() (time.Duration, error) {
	v := h.Env(envRetryDelay)
	if v == "" {
		return DefaultRetryDelay, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", envRetryDelay, v, err)
	}
	return d, nil
}

// behaviour is what the worker's handlers do between their two ledger writes, from the worker's
// settings: block (until released) or sleep.
type behaviour struct {
	sleepMin, sleepMax   time.Duration
	blockIDs, blockBlogs map[int64]bool
	blockUpTo            int
}

// handlerCall is one handler call as the ledger records it. Kind is "" for the keyed kind (NULL in the
// ledger) and names the kind of an extra's handler.
type handlerCall struct {
	Kind          string
	JobID, BlogID int64
	Seq           int64
	Attempt       int
	Token         int64
	Slot          int
}

// Handle is the worker's handler: it records the call's start in the ledger, blocks or sleeps as the
// worker's settings say, and records its end with the outcome ("ok" or the error). It returns the
// error the job should end with. An extra's handler calls it to be recorded like the keyed kind's.
func (h *workerHost) Handle(jctx context.Context, c handlerCall) error {
	return h.HandleWith(jctx, c, h.behave)
}

// HandleWith is Handle with work in place of the settings' blocking or sleeping.
func (h *workerHost) HandleWith(jctx context.Context, c handlerCall, work func(jctx context.Context, c handlerCall) error) error {
	// The ledger's writes must happen whatever becomes of the job's context.
	lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var kind any
	if c.Kind != "" {
		kind = c.Kind
	}
	var n int64
	err := retryUnsent(lctx, func() error {
		return h.Ledger.QueryRow(lctx, ledgerStartSQL,
			c.JobID, c.BlogID, c.Seq, c.Attempt, c.Token, c.Slot, h.Pid, h.Node, kind).Scan(&n)
	})
	if err != nil {
		h.Logger.Error("worker: ledger start", "id", c.JobID, "err", err)
		return fmt.Errorf("ledger start: %w", err)
	}
	result := work(jctx, c)
	outcome := "ok"
	if result != nil {
		outcome = result.Error()
	}
	err = retryUnsent(lctx, func() error {
		_, err := h.Ledger.Exec(lctx, ledgerEndSQL, n, outcome, c.BlogID, c.Slot)
		return err
	})
	if err != nil {
		h.Logger.Error("worker: ledger end", "id", c.JobID, "err", err)
		return fmt.Errorf("ledger end: %w", err)
	}
	return result
}

// behave blocks or sleeps as the worker's settings say.
func (h *workerHost) behave(jctx context.Context, c handlerCall) error {
	b := h.behaviour
	if (b.blockIDs[c.JobID] || b.blockBlogs[c.BlogID]) && (b.blockUpTo == 0 || c.Attempt <= b.blockUpTo) {
		return blockUntilReleased(jctx, h.Ledger, c.JobID)
	}
	sleep := b.sleepMin
	if b.sleepMax > b.sleepMin {
		sleep += rand.N(b.sleepMax - b.sleepMin + 1)
	}
	if sleep == 0 {
		return nil
	}
	select {
	case <-time.After(sleep):
		return nil
	case <-jctx.Done():
		return context.Cause(jctx)
	}
}

// workerExtras run in every worker process, in this order, after the keyed kind is registered and
// before the dispatcher starts: they give the workers more kinds or behaviour. An extra does nothing
// unless the environment variables it reads are set (see WorkerSettings), and an error it returns
// ends the worker with status 2.
var workerExtras = []func(h *workerHost) error{inputKindExtra, plainKindExtra, ledgerURLExtra, probeKindExtra, tickKindExtra, flakyKindExtra}

// retryUnsent runs f until it succeeds, fails in a way that may have had an effect, or ctx ends: f is
// retried only when it surely did not reach the server (say, a connection refused because the shared
// server was out of connections), so that a ledger write is recorded exactly once.
func retryUnsent(ctx context.Context, f func() error) error {
	wait := 20 * time.Millisecond
	for {
		err := f()
		var connectErr *pgconn.ConnectError
		if err == nil || !(pgconn.SafeToRetry(err) || errors.As(err, &connectErr)) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// blockUntilReleased holds a job until the test releases it (a row in mp_release) or its context ends.
func blockUntilReleased(ctx context.Context, db *pgxpool.Pool, id int64) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
		var released bool
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := db.QueryRow(qctx, `SELECT EXISTS (SELECT 1 FROM mp_release WHERE job_id = $1)`, id).Scan(&released)
		cancel()
		if err == nil && released {
			return nil
		}
	}
}
