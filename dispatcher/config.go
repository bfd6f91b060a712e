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
	// DB is the pool jobs are claimed and finished through. Required. Size it for Concurrency plus a
	// few connections: a running job holds none, but claims, heartbeats and finishes use them.
	DB *pgxpool.Pool
	// Redis are the lock nodes: 1, 3 or 5 independent servers (a Redlock quorum). Required when a
	// kind with a concurrency key is registered; kinds without one never touch Redis. Build the clients
	// with execlock.NewClient so a stalled node cannot block a call past its deadline.
	Redis []*redis.Client
	// RedisPrefix prefixes every lock key. Default "jobpipe:lock:".
	RedisPrefix string
	// DisableLockPipelining sends each lock command on a round trip of its own
	// (execlock.Config.DisablePipelining). By default the lock commands of all this dispatcher's
	// claims and workers go to each node in automatic pipelines: the queue locks of a claim pass
	// share a round trip or two, and keyed kinds run 30-60% more jobs/s on 2 cores
	// (docs/benchmarks.md).
	DisableLockPipelining bool
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
	// PollInterval is how often each kind looks for work when nothing woke it: the safety net under
	// LISTEN/NOTIFY and the scheduled-time timer. Default 2 s, or 200 ms with PollOnly.
	PollInterval time.Duration
	// PollOnly turns off LISTEN, for connections through a pooler in transaction mode (PgBouncer)
	// where LISTEN does not work. Jobs are then found by polling alone.
	PollOnly bool
	// ClaimBatch is the most jobs one claim statement takes. Default 100.
	ClaimBatch int
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
	// Observer receives each kind's job starts, outcomes, lock attempts and rescues, for metrics
	// (metrics.NewObserver). Default none: the job's path then skips it at the cost of a nil check.
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
	DefaultClaimBatch   = 100
	DefaultLeaderTTL    = 15 * time.Second
	DefaultRedisPrefix  = "jobpipe:lock:"
	// DefaultPruneInterval is the default Config.PruneInterval.
	DefaultPruneInterval = time.Minute
	pollOnlyInterval     = 200 * time.Millisecond
	// maxDefaultRescueInterval caps the default RescueInterval, so a long lease is rescued promptly
	// after it expires.
	maxDefaultRescueInterval = 5 * time.Second
)

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
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
		if c.PollOnly {
			c.PollInterval = pollOnlyInterval
		}
	}
	if c.ClaimBatch == 0 {
		c.ClaimBatch = DefaultClaimBatch
	}
	if c.RescueInterval == 0 {
		c.RescueInterval = min(c.LeaseTTL/3, maxDefaultRescueInterval)
	}
	if c.LeaderTTL == 0 {
		// Long enough to survive two missed renewals.
		c.LeaderTTL = max(DefaultLeaderTTL, 3*c.RescueInterval)
	}
	if c.PruneInterval == 0 {
		c.PruneInterval = DefaultPruneInterval
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
	if n := len(c.Redis); n > 0 && n%2 == 0 {
		errs = append(errs, fmt.Errorf("dispatcher: Config.Redis has %d nodes: Redlock needs an odd number (1, 3 or 5) of independent nodes", n))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("dispatcher: Config.Concurrency is %d: give 1 or more", c.Concurrency))
	}
	if c.ClaimBatch < 1 {
		errs = append(errs, fmt.Errorf("dispatcher: Config.ClaimBatch is %d: give 1 or more", c.ClaimBatch))
	}
	if c.LeaseTTL < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("dispatcher: Config.LeaseTTL %v is too short: give at least 100ms (default %v)", c.LeaseTTL, DefaultLeaseTTL))
	}
	if c.HeartbeatInterval <= 0 || c.HeartbeatInterval > c.LeaseTTL/2 {
		errs = append(errs, fmt.Errorf("dispatcher: Config.HeartbeatInterval %v must be positive and at most half of LeaseTTL (%v), so a lease is renewed before it expires", c.HeartbeatInterval, c.LeaseTTL))
	}
	if c.PollInterval <= 0 {
		errs = append(errs, fmt.Errorf("dispatcher: Config.PollInterval %v must be positive", c.PollInterval))
	}
	if c.RescueInterval <= 0 || c.RescueInterval >= c.LeaderTTL {
		errs = append(errs, fmt.Errorf("dispatcher: Config.RescueInterval %v must be positive and shorter than LeaderTTL %v, or leadership lapses between renewals", c.RescueInterval, c.LeaderTTL))
	}
	return errors.Join(errs...)
}
