package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/execlock"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// Options configures one run. Zero fields take the scenario's default (see Defaults), except the
// writers, which must be set, and DB.
type Options struct {
	// Scenario is one of Scenarios().
	Scenario string
	// DB is the connection configuration; the run sets search_path to Schema on copies of it.
	DB *pgxpool.Config
	// RedisNodes are the lock nodes (the scenarios of keyed kinds: unique, slots, fair), used unless
	// SpawnRedis is set.
	RedisNodes []string
	// SpawnRedis starts this many throw-away redis-server processes for the run instead.
	SpawnRedis int
	// Schema is the schema the run owns: created afresh, dropped at the end unless Keep.
	// Default jobpipe_bench_<scenario>.
	Schema string
	Keep   bool

	Jobs, Keys, Backlog int
	// Duration is steady's measured window, and how long latency and rate enqueue.
	Duration time.Duration
	// Rate is how many jobs latency and rate enqueue per second, one Enqueue call per job.
	Rate int
	// Inflight is how many jobs memory keeps running at once: its handlers hold until that many run.
	Inflight int
	// Dispatchers is a list for herd; the other scenarios take one number.
	Dispatchers []int
	// Workers is each dispatcher's Concurrency (slots: default Keys × KeyLimit, so that the key
	// limits, not the workers, bound what runs; unique: DefaultUniqueWorkers); ClaimBatch its
	// ClaimBatch; Pool its pool's MaxConns.
	Workers, ClaimBatch, Pool int
	// KeyLimit is the keyed kind's jobinfo.KeyLimit in slots and fair.
	KeyLimit int
	// KeyRunJobs and KeyRunTime are each dispatcher's key-run budget (dispatcher.Config's fields of
	// those names); 0 leaves the dispatcher's default.
	KeyRunJobs int
	KeyRunTime time.Duration
	// SlowFraction of slots' jobs sleep Slow in their handler; the others return at once. The slow
	// jobs come in runs of SlowRun consecutive jobs of one key (default 2 × KeyLimit), so that their
	// key reaches its limit; 1 spreads them evenly.
	SlowFraction float64
	Slow         time.Duration
	SlowRun      int
	// BigJobs wait in fair's one big key, enqueued first; SmallKeys keys of one job each follow.
	BigJobs, SmallKeys int
	// Handler is how long each handler of fair, latency and rate sleeps, and how long memory's
	// handlers hold once Inflight of them run.
	Handler time.Duration
	// Tail is how long fair keeps working once every small job is done, before it stops (unless Drain).
	Tail time.Duration
	// Drain makes fair work the big key's whole backlog before it stops.
	Drain bool
	// Batch is how many jobs one EnqueueMany call inserts.
	Batch int
	// Sizes are select's pending-row counts; Repeat its timed passes per size.
	Sizes  []int
	Repeat int
	// Lead is how long after the herd's insert starts its jobs fall due.
	Lead time.Duration
	// Explain prints EXPLAIN (ANALYZE, BUFFERS) of the dispatcher's head query (select).
	Explain bool
	// NoAnalyze skips the ANALYZE (select: VACUUM ANALYZE) a run gives a table after loading it, which
	// stands in for the auto-analyze a stock server runs within a minute of a bulk load.
	NoAnalyze bool
	// Progress is how often a progress line is written to Log; negative turns it off.
	Progress time.Duration
	// Timeout bounds the whole run.
	Timeout time.Duration

	// Out receives the table and the RESULT line; Log the progress lines and the dispatchers' warnings.
	Out, Log io.Writer
}

// Defaults of every scenario: the sizes its target is stated for.
const (
	DefaultDrainJobs       = 1_000_000
	DefaultUniqueJobs      = 1_000_000
	DefaultHerdJobs        = 100_000
	DefaultUniqueKeys      = 10_000
	DefaultSelectKeys      = 100_000
	DefaultSlotsJobs       = 1_000_000
	DefaultSlotsKeys       = 100
	DefaultKeyLimit        = 10
	DefaultSlowFrac        = 0.01
	DefaultSlow            = time.Second
	DefaultBigJobs         = 100_000
	DefaultSmallKeys       = 1_000
	DefaultHandler         = time.Millisecond
	DefaultRate            = 800
	DefaultLatencyDuration = 5 * time.Minute
	DefaultLatencyWorkers  = 32
	DefaultRateRate        = 600
	DefaultRateDuration    = 5 * time.Minute
	DefaultRateWorkers     = 32
	DefaultMemoryJobs      = 20_000
	DefaultInflight        = 2_000
	DefaultMemoryHold      = 2 * time.Second
	maxRate                = 100_000
	DefaultTail            = 2 * time.Second
	DefaultBacklog         = 75_000
	DefaultDuration        = 60 * time.Second
	DefaultWorkers         = 100
	DefaultPool            = 8
	DefaultHerdPool        = 4
	DefaultBatch           = 10_000
	DefaultRepeat          = 20
	DefaultLead            = 5 * time.Second
	DefaultProgress        = time.Second
	DefaultTimeout         = 30 * time.Minute
	maxLedgerJobs          = ledgerChunks << ledgerChunkBits
	maxHeadsPerPass        = 1000
	selectWarmupPasses     = 2
)

// DefaultUniqueWorkers is unique's Concurrency: slots' default (DefaultSlotsKeys × DefaultKeyLimit),
// so that the two scenarios the slots target compares run the same number of workers. A unique job holds
// its worker from its claim to its finish (the execution lock, the handler, the batched finish, the
// release), so with drain's 100 workers the worker count, not the dispatcher, would bound unique's rate.
const DefaultUniqueWorkers = DefaultSlotsKeys * DefaultKeyLimit

// DefaultHerdDispatchers and DefaultSizes are the sweeps of herd and select.
var (
	DefaultHerdDispatchers = []int{1, 3, 5, 7, 10}
	DefaultSizes           = []int{10_000, 100_000, 1_000_000}
)

// withDefaults returns o with zero fields set for its scenario.
func (o Options) withDefaults() Options {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	switch o.Scenario {
	case "drain":
		def(&o.Jobs, DefaultDrainJobs)
	case "unique":
		def(&o.Jobs, DefaultUniqueJobs)
		def(&o.Keys, DefaultUniqueKeys)
		def(&o.Workers, DefaultUniqueWorkers)
	case "slots":
		def(&o.Jobs, DefaultSlotsJobs)
		def(&o.Keys, DefaultSlotsKeys)
		def(&o.KeyLimit, DefaultKeyLimit)
		def(&o.Workers, min(o.Keys, o.Jobs)*o.KeyLimit)
		if o.SlowFraction == 0 {
			o.SlowFraction = DefaultSlowFrac
		}
		if o.Slow == 0 {
			o.Slow = DefaultSlow
		}
		def(&o.SlowRun, 2*o.KeyLimit)
	case "fair":
		def(&o.BigJobs, DefaultBigJobs)
		def(&o.SmallKeys, DefaultSmallKeys)
		def(&o.KeyLimit, DefaultKeyLimit)
		if o.Handler == 0 {
			o.Handler = DefaultHandler
		}
		if o.Tail == 0 {
			o.Tail = DefaultTail
		}
	case "herd":
		def(&o.Jobs, DefaultHerdJobs)
		def(&o.Pool, DefaultHerdPool)
		if len(o.Dispatchers) == 0 {
			o.Dispatchers = slices.Clone(DefaultHerdDispatchers)
		}
	case "latency":
		def(&o.Rate, DefaultRate)
		def(&o.Workers, DefaultLatencyWorkers)
		if o.Duration == 0 {
			o.Duration = DefaultLatencyDuration
		}
		if o.Handler == 0 {
			o.Handler = DefaultHandler
		}
	case "rate":
		def(&o.Rate, DefaultRateRate)
		def(&o.Workers, DefaultRateWorkers)
		if o.Duration == 0 {
			o.Duration = DefaultRateDuration
		}
		if o.Handler == 0 {
			o.Handler = DefaultHandler
		}
	case "memory":
		def(&o.Jobs, DefaultMemoryJobs)
		def(&o.Inflight, DefaultInflight)
		def(&o.Workers, o.Inflight)
		if o.Handler == 0 {
			o.Handler = DefaultMemoryHold
		}
	case "select":
		def(&o.Keys, DefaultSelectKeys)
		if len(o.Sizes) == 0 {
			o.Sizes = slices.Clone(DefaultSizes)
		}
	}
	def(&o.Backlog, DefaultBacklog)
	def(&o.Workers, DefaultWorkers)
	def(&o.ClaimBatch, dispatcher.DefaultClaimBatchFor(o.Workers))
	def(&o.Pool, DefaultPool)
	def(&o.Batch, DefaultBatch)
	def(&o.Repeat, DefaultRepeat)
	if len(o.Dispatchers) == 0 {
		o.Dispatchers = []int{1}
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Lead == 0 {
		o.Lead = DefaultLead
	}
	if o.Progress == 0 {
		o.Progress = DefaultProgress
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Schema == "" {
		o.Schema = "jobpipe_bench_" + o.Scenario
	}
	slices.Sort(o.Sizes)
	return o
}

// Validate checks o after defaults, naming the command-line flag of each problem. Every problem is
// reported at once. DB, Out and Log are checked by Run.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !slices.Contains(Scenarios(), o.Scenario) {
		bad("unknown scenario %q: want one of %v", o.Scenario, Scenarios())
	}
	if o.Schema != "" {
		if err := jobinfo.ValidateName("schema", o.Schema); err != nil {
			bad("--schema: %v", err)
		}
	}
	for _, c := range []struct {
		flag string
		v    int
	}{{"--jobs", o.Jobs}, {"--keys", o.Keys}, {"--backlog", o.Backlog}, {"--workers", o.Workers},
		{"--claim-batch", o.ClaimBatch}, {"--pool", o.Pool}, {"--batch", o.Batch}, {"--repeat", o.Repeat},
		{"--big-jobs", o.BigJobs}, {"--small-keys", o.SmallKeys}, {"--slow-run", o.SlowRun}, {"--rate", o.Rate},
		{"--inflight", o.Inflight}, {"--key-run-jobs", o.KeyRunJobs}} {
		if c.v < 0 {
			bad("%s must be positive, not %d", c.flag, c.v)
		}
	}
	if o.Jobs > maxLedgerJobs || o.Backlog > maxLedgerJobs || o.BigJobs+o.SmallKeys > maxLedgerJobs {
		bad("--jobs, --backlog and --big-jobs plus --small-keys must be at most %d", maxLedgerJobs)
	}
	if o.Rate > maxRate {
		bad("--rate must be at most %d jobs/s, not %d", maxRate, o.Rate)
	}
	if (o.Scenario == "latency" || o.Scenario == "rate") && o.Rate > 0 && o.Duration > 0 {
		if n := latencyJobs(o.Rate, o.Duration); n < 1 || n > maxLedgerJobs {
			bad("--rate times --duration must come to 1 to %d jobs, not %d", maxLedgerJobs, n)
		}
	}
	if o.Scenario == "memory" && o.Inflight > 0 && (o.Jobs < o.Inflight || o.Workers < o.Inflight) {
		bad("--jobs (%d) and --workers (%d) must be at least --inflight (%d), or that many jobs never run at once",
			o.Jobs, o.Workers, o.Inflight)
	}
	if o.KeyLimit < 0 || o.KeyLimit > execlock.MaxLimit {
		bad("--key-limit must be from 1 to %d, not %d", execlock.MaxLimit, o.KeyLimit)
	}
	if o.SlowFraction < 0 || o.SlowFraction > 1 {
		bad("--slow-fraction must be from 0 to 1 (0 meaning the default), not %v", o.SlowFraction)
	}
	if o.Slow < 0 || o.Handler < 0 || o.Tail < 0 {
		bad("--slow, --handler and --tail must be positive")
	}
	if o.SpawnRedis < 0 || o.SpawnRedis > 7 {
		bad("--spawn-redis must be from 0 to 7, not %d", o.SpawnRedis)
	}
	if o.Duration < 0 || o.Lead < 0 || o.Timeout < 0 || o.KeyRunTime < 0 {
		bad("--duration, --lead, --timeout and --key-run-time must be positive")
	}
	for _, d := range o.Dispatchers {
		if d < 1 || d > 32 {
			bad("--dispatchers: each count must be from 1 to 32, not %d", d)
		}
	}
	if o.Scenario != "herd" && len(o.Dispatchers) > 1 {
		bad("--dispatchers: only herd takes a list; %s takes one number", o.Scenario)
	}
	for _, s := range o.Sizes {
		if s < 1 || s > maxLedgerJobs {
			bad("--sizes: each size must be from 1 to %d, not %d", maxLedgerJobs, s)
		}
	}
	return errors.Join(errs...)
}
