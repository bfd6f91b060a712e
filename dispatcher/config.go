package dispatcher

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// Config configures a Dispatcher. Zero fields take the defaults stated on each.
type Config struct {
	// DB is the application's pool. Required. Start opens a second, smaller pool with DB's settings
	// (DispatcherConns connections) for the dispatcher's own statements: claims, heartbeats, finishes
	// and maintenance never wait behind the application's or the handlers' use of DB. From DB itself
	// the dispatcher takes only the transactions of RegisterTx handlers (at most TxHandlerConns at
	// once) and the registry checks of Start. A Register handler holds no connection of either pool.
	DB *pgxpool.Pool
	// DispatcherConns is the size of the dispatcher's own pool. Default DB's MaxConns, at least 2,
	// the least that lets a heartbeat run while a claim does.
	DispatcherConns int
	// TxHandlerConns is how many RegisterTx handlers may hold a connection of DB at once, over all
	// kinds; the others wait for one before their transaction begins (their lease is renewed
	// meanwhile). Default DB's MaxConns minus 1, at least 1, which leaves DB a connection for the
	// application's other statements. It cannot exceed DB's MaxConns.
	TxHandlerConns int
	// Redis are the lock nodes: 1, 3 or 5 independent servers (a Redlock quorum). Required when a
	// kind with a concurrency key is registered; kinds without one never touch Redis. Build the clients
	// with execlock.NewClient so a stalled node cannot block a call past its deadline. With a keyed
	// kind, Start fails unless a quorum of them answers PING (see StartWithoutLockQuorum).
	Redis []*redis.Client
	// StartWithoutLockQuorum lets Start succeed when fewer than a quorum of the Redis lock nodes
	// answer. By default Start then fails, naming each node that did not answer and its error, so
	// that a mistyped address or a server that is down is found at once. With it, Start logs that
	// error at WARN and starts: plain kinds run, and keyed jobs wait until a quorum answers (each
	// kind that waits is reported: see Dispatcher.Start).
	StartWithoutLockQuorum bool
	// RedisPrefix prefixes every lock key. Default "jobpipe:lock:".
	RedisPrefix string
	// KeyRunJobs and KeyRunTime are a key run's fairness budget. A worker of a keyed kind that
	// holds a key's slot keeps it while the key has due jobs, running them one after another under
	// the same execution lock, each claimed as its predecessor's outcome is written (a key run). The
	// run gives the key back after KeyRunJobs jobs or once it has lasted KeyRunTime, whichever
	// comes first, so that the keys waiting behind it get this dispatcher's workers; the key then
	// goes back to the claims like any other. The budget binds whether or not a key waits: with
	// all its workers busy, a dispatcher runs no claim pass that would see one. Defaults
	// DefaultKeyRunJobs and DefaultKeyRunTime.
	// KeyRunJobs 1 ends every run after one job.
	KeyRunJobs int
	KeyRunTime time.Duration
	// NodeName names this dispatcher in leases, locks and logs. Default hostname:pid.
	NodeName string
	// Concurrency is how many jobs of one kind run at once in this dispatcher, unless the kind sets
	// its own (jobinfo.Concurrency). Default 100.
	Concurrency int
	// LeaseTTL is how long a claim stays valid without a heartbeat: the row's lease and the execution
	// lock both expire after it, and a worker that dies holds its jobs until then and the rescuer's next
	// round. Time in which the database could not be reached does not count against a live worker:
	// see RescueInterval. Default 30 s.
	LeaseTTL time.Duration
	// HeartbeatInterval is how often running jobs extend their lease. Default LeaseTTL/3.
	HeartbeatInterval time.Duration
	// HandlerGrace is how long a handler whose context has ended (its kind's timeout passed, its
	// lease was lost, or Stop's deadline passed) has to return before the worker stops waiting for it.
	// The worker then records the attempt as a retry, gives back the job's lease, its key's slot and
	// its place in Concurrency, and lets the handler's goroutine run on until it returns; whatever it
	// returns changes nothing. Default 5 s: a handler that honours its context returns well within
	// it (a cancelled query or request ends at once, a rollback takes a round trip), and a key is not
	// held much past its job's timeout.
	HandlerGrace time.Duration
	// PollInterval is how often each kind looks for work when nothing woke it: the safety net under
	// LISTEN/NOTIFY and the scheduled-time timer. Default 2 s, or 200 ms with PollOnly.
	PollInterval time.Duration
	// PollOnly turns off LISTEN, for connections through a pooler in transaction mode (PgBouncer)
	// where LISTEN does not work. Jobs are then found by polling alone.
	PollOnly bool
	// ClaimBatch is the most jobs one claim takes. A claim (for a keyed kind, a claim pass) costs a
	// few statements and a commit whatever its size, and a kind claims one at a time, so a kind with
	// many workers fills them sooner with bigger claims. Default DefaultClaimBatchFor the kind's
	// concurrency: a quarter of it, at least DefaultClaimBatch.
	ClaimBatch int
	// FinishWait is the longest outcomes may wait to be written together, while fewer than a batch's
	// worth are ready: when jobs trickle in, each outcome would otherwise cost a statement and a commit
	// of its own. It delays a job's processed_at (and a RunAgain job's next run) by at most that, and
	// adds nothing under load, where batches fill at once. An outcome that continues a key run (its
	// next job waits for it) ends the wait, and kinds with a total limit (a finished job holds its
	// share until written) never wait; a key's slot stays held until its job's outcome is written,
	// so a job of the key enqueued while its predecessor ran may start that much later. Default
	// DefaultFinishWait, or half of HeartbeatInterval when that is shorter; negative writes each
	// outcome as soon as a statement is free. It must be shorter than HeartbeatInterval, so that a
	// finished job's lease outlasts the wait.
	FinishWait time.Duration
	// RescueInterval is how often the elected leader looks for expired leases. Default LeaseTTL/3,
	// at most 5 s. A lease is never rescued because of time in which its worker could not reach the
	// database: the leader rescues only once its own statements have reached the database without a
	// failure, and the server has been up, for 2 x HeartbeatInterval + 1 s, which lets live workers
	// write their waiting outcomes and renew their leases first. After an outage, jobs of workers that
	// died are rescued within that plus 3 x RescueInterval of the database answering again.
	RescueInterval time.Duration
	// LeaderTTL is how long the maintenance leadership lasts without renewal. Default 15 s, or three
	// RescueIntervals when that is longer.
	LeaderTTL time.Duration
	// Logger receives the dispatcher's logs. Default: slog.Default() at Warn and above.
	Logger *slog.Logger
	// Observer receives each kind's job starts, outcomes, lock attempts, rescues and waits for a
	// quorum of lock nodes, and the number of lock nodes answering, for metrics (metrics.NewObserver). Default none: the job's path then skips it at the cost of a nil check.
	Observer Observer

	// PruneInterval is how often each kind's pruning leader (one node per kind, elected like the
	// rescuer) deletes the kind's finished jobs past their retention (jobinfo.Retention). Default
	// 1 min; negative turns pruning off in this dispatcher (it then never takes a pruning lease).
	PruneInterval time.Duration
}

// Defaults, exported for documentation and tests.
const (
	DefaultConcurrency  = 100
	DefaultLeaseTTL     = 30 * time.Second
	DefaultPollInterval = 2 * time.Second
	// DefaultClaimBatch is the least default ClaimBatch (see DefaultClaimBatchFor).
	DefaultClaimBatch = 100
	DefaultLeaderTTL  = 15 * time.Second
	// DefaultHandlerGrace is the default Config.HandlerGrace.
	DefaultHandlerGrace = 5 * time.Second
	DefaultRedisPrefix  = "jobpipe:lock:"
	// DefaultKeyRunJobs and DefaultKeyRunTime are the defaults of Config.KeyRunJobs and KeyRunTime.
	DefaultKeyRunJobs = 1000
	DefaultKeyRunTime = 5 * time.Second
	// DefaultPruneInterval is the default Config.PruneInterval.
	DefaultPruneInterval = time.Minute
	// DefaultFinishWait is the default Config.FinishWait.
	DefaultFinishWait = 10 * time.Millisecond
	pollOnlyInterval  = 200 * time.Millisecond
	// minDispatcherConns lets a claim, a heartbeat and a finish each wait for at most one other
	// statement rather than for one another in turn.
	minDispatcherConns = 2
	// maxDefaultRescueInterval caps the default RescueInterval, so a long lease is rescued promptly
	// after it expires.
	maxDefaultRescueInterval = 5 * time.Second
)

// DefaultClaimBatchFor is the ClaimBatch of a kind that runs concurrency jobs at once, when
// Config.ClaimBatch is 0: a quarter of concurrency, at least DefaultClaimBatch.
func DefaultClaimBatchFor(concurrency int) int { return max(DefaultClaimBatch, concurrency/4) }

// withDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.RedisPrefix == "" {
		c.RedisPrefix = DefaultRedisPrefix
	}
	if c.NodeName == "" {
		host, _ := os.Hostname()
		c.NodeName = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = c.LeaseTTL / 3
	}
	if c.HandlerGrace == 0 {
		c.HandlerGrace = DefaultHandlerGrace
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
		if c.PollOnly {
			c.PollInterval = pollOnlyInterval
		}
	}
	if c.RescueInterval == 0 {
		c.RescueInterval = min(c.LeaseTTL/3, maxDefaultRescueInterval)
	}
	if c.LeaderTTL == 0 {
		// Long enough to survive two missed renewals.
		c.LeaderTTL = max(DefaultLeaderTTL, 3*c.RescueInterval)
	}
	if c.KeyRunJobs == 0 {
		c.KeyRunJobs = DefaultKeyRunJobs
	}
	if c.KeyRunTime == 0 {
		c.KeyRunTime = DefaultKeyRunTime
	}
	if c.PruneInterval == 0 {
		c.PruneInterval = DefaultPruneInterval
	}
	if c.FinishWait == 0 {
		c.FinishWait = min(DefaultFinishWait, c.HeartbeatInterval/2)
	}
	if c.DB != nil {
		dbConns := int(c.DB.Config().MaxConns)
		if c.DispatcherConns == 0 {
			c.DispatcherConns = max(dbConns, minDispatcherConns)
		}
		if c.TxHandlerConns == 0 {
			c.TxHandlerConns = max(dbConns-1, 1)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return c
}

// validate reports every problem with c at once.
func (c Config) validate() error {
	var errs []error
	if c.DB == nil {
		errs = append(errs, errors.New("dispatcher: Config.DB is nil: pass a *pgxpool.Pool"))
	}
	if c.DB != nil && c.DispatcherConns < minDispatcherConns {
		errs = append(errs, fmt.Errorf("dispatcher: Config.DispatcherConns is %d: the dispatcher needs at least %d connections of its own (so that a heartbeat can run while a claim does); give %d or more, or 0 for the default", c.DispatcherConns, minDispatcherConns, minDispatcherConns))
	}
	if c.DB != nil && (c.TxHandlerConns < 1 || c.TxHandlerConns > int(c.DB.Config().MaxConns)) {
		errs = append(errs, fmt.Errorf("dispatcher: Config.TxHandlerConns is %d: give 1 to Config.DB's MaxConns (%d), or 0 for the default; to run more RegisterTx handlers at once, raise the pool's pool_max_conns", c.TxHandlerConns, c.DB.Config().MaxConns))
	}
	if n := len(c.Redis); n > 0 && n%2 == 0 {
		errs = append(errs, fmt.Errorf("dispatcher: Config.Redis has %d nodes: Redlock needs an odd number (1, 3 or 5) of independent nodes", n))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("dispatcher: Config.Concurrency is %d: give 1 or more", c.Concurrency))
	}
	if c.ClaimBatch < 0 {
		errs = append(errs, fmt.Errorf("dispatcher: Config.ClaimBatch is %d: give 1 or more, or 0 for the default", c.ClaimBatch))
	}
	if c.LeaseTTL < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("dispatcher: Config.LeaseTTL %v is too short: give at least 100ms (default %v)", c.LeaseTTL, DefaultLeaseTTL))
	}
	if c.HeartbeatInterval <= 0 || c.HeartbeatInterval > c.LeaseTTL/2 {
		errs = append(errs, fmt.Errorf("dispatcher: Config.HeartbeatInterval %v must be positive and at most half of LeaseTTL (%v), so a lease is renewed before it expires", c.HeartbeatInterval, c.LeaseTTL))
	}
	if c.HandlerGrace < 0 {
		errs = append(errs, fmt.Errorf("dispatcher: Config.HandlerGrace %v is negative: give how long a handler whose context ended may take to return (default %v)", c.HandlerGrace, DefaultHandlerGrace))
	}
	if c.KeyRunJobs < 1 {
		errs = append(errs, fmt.Errorf("dispatcher: Config.KeyRunJobs is %d: give the most jobs a key run may work before it gives its key back (1: no runs), or 0 for the default %d", c.KeyRunJobs, DefaultKeyRunJobs))
	}
	if c.KeyRunTime < 0 {
		errs = append(errs, fmt.Errorf("dispatcher: Config.KeyRunTime %v is negative: give how long a key run may last before it gives its key back, or 0 for the default %v", c.KeyRunTime, DefaultKeyRunTime))
	}
	if c.FinishWait >= c.HeartbeatInterval && c.HeartbeatInterval > 0 {
		errs = append(errs, fmt.Errorf("dispatcher: Config.FinishWait %v must be shorter than HeartbeatInterval %v, so that a finished job's lease outlasts the wait (default %v; negative: no wait)", c.FinishWait, c.HeartbeatInterval, DefaultFinishWait))
	}
	if c.PollInterval <= 0 {
		errs = append(errs, fmt.Errorf("dispatcher: Config.PollInterval %v must be positive", c.PollInterval))
	}
	if c.RescueInterval <= 0 || c.RescueInterval >= c.LeaderTTL {
		errs = append(errs, fmt.Errorf("dispatcher: Config.RescueInterval %v must be positive and shorter than LeaderTTL %v, or leadership lapses between renewals", c.RescueInterval, c.LeaderTTL))
	}
	return errors.Join(errs...)
}
