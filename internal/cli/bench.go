package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/jobpipe/jobpipe/internal/bench"
)

const benchUsage = `usage: jobpipe bench drain|steady|unique|slots|fair|herd|select|latency|rate|memory [flags]

Runs one benchmark of docs/benchmarks.md against PostgreSQL (and Redis for unique, slots and fair) in
a schema of its own, created afresh (jobpipe's migrations applied, the kinds created with
jobinfo.Define and TableSpec.CreateSQL) and dropped at the end unless --keep. It writes a progress line
every second to stderr, then a table to stdout and, as the last line, one RESULT line of
key=value pairs, e.g.
  RESULT scenario=drain jobs=1000000 ... jobs_per_s=32051 ... duplicates=0 lost=0 early=0 verified=true
Every scenario counts its handler runs per job and checks them against the table: duplicates (jobs run
more than once), lost (never run, or not processed) and early (started before process_after) must be
0, or the command exits 1. drain, unique and slots also report what their work cost per job: CPU time
of this process, of the dispatchers' PostgreSQL backends, of the Redis lock nodes and of the machine
(where the server runs on this machine), statements and Redis round trips.

scenarios and targets (for a 2-core machine):
  drain   pre-insert --jobs no-op jobs of a plain kind, then work them all; also the table's dead
          tuples after                                                       >= 30,000 jobs/s
  steady  insert and work for --duration, keeping about --backlog waiting    >= 30,000 jobs/s
  unique  --jobs jobs over --keys keys of a keyed kind (one per key at a time, redsync); checks that
          no key ever runs two jobs and each key's jobs start in order      >= 15,000 jobs/s with
          1 Redis node, >= 10,000 with 3 (--spawn-redis 3)
  slots   --jobs jobs over --keys keys of a keyed kind with --key-limit slots per key; a
          --slow-fraction of the handlers sleep --slow (in runs of --slow-run jobs of one key), the
          rest return at once. Checks that no key ever runs more than its limit; reports the keys
          that reached it, the failed lock attempts, the slot wait (a slot freed at the limit ->
          the key's next start) and the least work time the slow jobs allow (slow_bound_s: the
          key with the most, sleeping on all its slots)
                                         max per key <= limit; >= 90% of unique's jobs/s
  fair    --big-jobs jobs of one key enqueued first, then --small-keys keys of one job each; the
          dispatchers start once all wait. Times the small jobs' starts and counts the big jobs
          started before the last of them; the big key must never run more than --key-limit.
          Stops --tail after the small jobs are done (--drain: once everything is)
                                         small jobs start within the first passes
  herd    --jobs jobs due at one instant, worked by each count of --dispatchers (each dispatcher its
          own pool): 0 wasted claims, every job started within 2 s of due, 0 early starts, and a time
          that does not grow with dispatchers
  select  for each of --sizes pending rows over --keys keys, one dispatch pass choosing 1,000 heads:
          the dispatcher's statements, and a recursive-CTE skip scan for comparison
                                                   p50 <= 20 ms at 1M rows and <= 2x the 10k figure
  latency --rate jobs per second for --duration, each its own Enqueue call on a fixed schedule (one
          caller per 25 jobs/s, at most 32), worked by one dispatcher of --workers with a --handler
          sleep. Enqueue-to-start is the Enqueue call to the handler's start (local clock);
          end-to-end is created_at to processed_at (database clock)
                              enqueue-to-start p99 <= 20 ms, end-to-end p99 <= 50 ms at 800 jobs/s
  rate    what a job costs at a fixed, moderate load: --rate jobs per second for --duration, each
          its own Enqueue call with a 256-byte payload on latency's schedule and callers, worked by
          one dispatcher of --workers with a --handler sleep. Over the window from the first job due
          to the last processed: CPU time per job of this process (/proc/self/stat), of the
          PostgreSQL backends serving the run (their /proc/<pid>/stat, found in pg_stat_activity
          by application_name) and of the whole machine (/proc/stat), the database's transactions
          per job (pg_stat_database), and enqueue-to-start. Needs the server on this machine and
          its processes readable (root)                                              (no target)
  memory  --jobs jobs enqueued up front, then one dispatcher of --inflight workers whose handlers
          hold until --inflight run at once, then --handler long; samples this process (VmRSS, Go
          heap, goroutines) every 100 ms. The process also holds the bench's own pool and ledger
                                                       RSS <= 100 MiB with 2,000 jobs in flight

flags (defaults in brackets):
  --database-url URL   PostgreSQL [$DATABASE_URL, else ` + defaultDatabaseURL + `]
  --redis-url NODES    Redis lock nodes, comma-separated host:port or redis:// URLs (unique, slots
                       and fair) [$REDIS_URL, else ` + defaultRedisURL + `]
  --spawn-redis N      start N throw-away redis-server processes on free ports for the run instead
                       (no persistence; killed at the end, also on error or interrupt) [0]
  --schema NAME        the schema the run owns, dropped and created afresh; a run that finds
                       another run on it stops [jobpipe_bench_SCENARIO]
  --keep               keep the schema at the end
  --jobs N             jobs [drain 1000000, unique 1000000, slots 1000000, herd 100000,
                       memory 20000]
  --keys N             keys [unique 10000, slots 100, select 100000; select uses min(keys, size)];
                       unique --keys equal to --jobs is one job per key (shallow keys)
  --key-limit N        slots, fair: jobs of one key running at once (jobinfo.KeyLimit) [10]
  --slow-fraction F    slots: the share of jobs whose handler sleeps --slow [0.01]
  --slow D             slots: how long a slow handler sleeps [1s]
  --slow-run N         slots: the slow jobs come in runs of N consecutive jobs of one key, so that
                       the key reaches its limit; 1 spreads them evenly [2 x key-limit]
  --big-jobs N         fair: jobs of the big key, enqueued first [100000]
  --small-keys N       fair: keys of one job each, enqueued after the big key's [1000]
  --handler D          fair, latency, rate: how long every handler sleeps [1ms]; memory: how long
                       the handlers hold once --inflight run [2s]
  --tail D             fair: how long to go on once the small jobs are done, then stop [2s]
  --drain              fair: stop only once the big key's backlog is done too
  --duration D         steady: the measured window [60s]; latency, rate: how long to enqueue [5m]
  --rate N             latency, rate: jobs enqueued per second [latency 800, rate 600]
  --inflight N         memory: jobs running at once [2000]
  --backlog N          steady: waiting jobs to keep [75000]
  --dispatchers LIST   dispatchers in this process, each with its own pool [herd 1,3,5,7,10; others 1]
  --workers N          each dispatcher's Concurrency [100; unique 1000; slots keys x key-limit;
                       latency 32; rate 32; memory --inflight]
  --claim-batch N      each dispatcher's ClaimBatch [a quarter of --workers, at least 100]
  --key-run-jobs N     each dispatcher's KeyRunJobs, a key run's budget of jobs [1000]
  --key-run-time D     each dispatcher's KeyRunTime, a key run's budget of time [5s]
  --pool N             connections in each dispatcher's pool [8; herd 4]
  --batch N            jobs per EnqueueMany call [10000]
  --sizes LIST         select: pending rows per round [10000,100000,1000000]
  --repeat N           select: timed passes per size and statement, after 2 warm-ups [20]
  --lead D             herd: the jobs fall due this long after their insert starts [5s]
  --no-analyze         do not ANALYZE a table after loading it (select: VACUUM ANALYZE); by default
                       a run does, standing in for the auto-analyze a stock server runs within a
                       minute of a bulk load (the settings table shows the server's autovacuum)
  --explain            select: print EXPLAIN (ANALYZE, BUFFERS) of the statements at the largest size
                       (always in --json)
  --vs SCENARIO        then run SCENARIO (drain, slots, steady or unique) on the same database with
                       the same flags and the job count this run reported, print its RESULT line,
                       and append vs=SCENARIO vs_jobs_per_s=ITS_RATE ratio=THIS_RATE/ITS_RATE to this
                       run's RESULT line (last). For drain, steady, unique and slots, whose RESULT has
                       jobs_per_s. Both runs use --schema when given (with --keep, it holds the
                       second run's tables)
  --json FILE          write the whole report as JSON (with --vs, the second run's result in details.vs)
  --cpuprofile FILE    write a CPU profile of this process
  --progress D         interval of the progress lines; 0 turns them off [1s]
  --timeout D          give up after this long [30m]
Counts take k and M suffixes in lists (--sizes 10k,100k,1M).

Exit status: 0 when the run finished and its accounting holds, 1 when it failed or found a lost,
doubled or early job, 2 when the command line is wrong.
`

func init() {
	register(&command{name: "bench", summary: "run a benchmark scenario and check its accounting", usage: benchUsage, run: runBench})
}

// benchFlags are the command line's values before they become bench.Options.
type benchFlags struct {
	dbURL, redisURL                      *string
	json, cpuprofile, dispatchers, sizes string
	// vs is the scenario --vs compares this run with; empty for none.
	vs   string
	opts bench.Options
}

func (f *benchFlags) define(fs *flag.FlagSet) {
	o := &f.opts
	f.dbURL, f.redisURL = databaseURLFlag(fs), redisNodesFlag(fs)
	fs.IntVar(&o.SpawnRedis, "spawn-redis", 0, "")
	fs.StringVar(&o.Schema, "schema", "", "")
	fs.BoolVar(&o.Keep, "keep", false, "")
	fs.IntVar(&o.Jobs, "jobs", 0, "")
	fs.IntVar(&o.Keys, "keys", 0, "")
	fs.IntVar(&o.KeyLimit, "key-limit", 0, "")
	fs.Float64Var(&o.SlowFraction, "slow-fraction", 0, "")
	fs.DurationVar(&o.Slow, "slow", 0, "")
	fs.IntVar(&o.SlowRun, "slow-run", 0, "")
	fs.IntVar(&o.BigJobs, "big-jobs", 0, "")
	fs.IntVar(&o.SmallKeys, "small-keys", 0, "")
	fs.DurationVar(&o.Handler, "handler", 0, "")
	fs.DurationVar(&o.Tail, "tail", 0, "")
	fs.BoolVar(&o.Drain, "drain", false, "")
	fs.DurationVar(&o.Duration, "duration", 0, "")
	fs.IntVar(&o.Rate, "rate", 0, "")
	fs.IntVar(&o.Inflight, "inflight", 0, "")
	fs.IntVar(&o.Backlog, "backlog", 0, "")
	fs.StringVar(&f.dispatchers, "dispatchers", "", "")
	fs.IntVar(&o.Workers, "workers", 0, "")
	fs.IntVar(&o.ClaimBatch, "claim-batch", 0, "")
	fs.IntVar(&o.KeyRunJobs, "key-run-jobs", 0, "")
	fs.DurationVar(&o.KeyRunTime, "key-run-time", 0, "")
	fs.IntVar(&o.Pool, "pool", 0, "")
	fs.IntVar(&o.Batch, "batch", 0, "")
	fs.StringVar(&f.sizes, "sizes", "", "")
	fs.IntVar(&o.Repeat, "repeat", 0, "")
	fs.DurationVar(&o.Lead, "lead", 0, "")
	fs.BoolVar(&o.Explain, "explain", false, "")
	fs.BoolVar(&o.NoAnalyze, "no-analyze", false, "")
	fs.StringVar(&f.vs, "vs", "", "")
	fs.StringVar(&f.json, "json", "", "")
	fs.StringVar(&f.cpuprofile, "cpuprofile", "", "")
	fs.DurationVar(&o.Progress, "progress", bench.DefaultProgress, "")
	fs.DurationVar(&o.Timeout, "timeout", 0, "")
}

// parseBench turns the command line into options; every error is a usage error.
func parseBench(e *env, args []string) (*benchFlags, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	f := &benchFlags{}
	f.define(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return nil, err
	}
	switch {
	case len(pos) == 0:
		return nil, usagef("missing the scenario: one of %s", strings.Join(bench.Scenarios(), ", "))
	case len(pos) > 1:
		return nil, usagef("too many arguments %q: give one scenario", pos)
	}
	o := &f.opts
	o.Scenario = pos[0]
	var errs []error
	fs.Visit(func(fl *flag.Flag) {
		if v := fl.Value.String(); (v == "0" || v == "0s") && fl.Name != "progress" && fl.Name != "spawn-redis" {
			errs = append(errs, fmt.Errorf("--%s must be positive, not 0", fl.Name))
		}
	})
	vsGiven := false
	fs.Visit(func(fl *flag.Flag) { vsGiven = vsGiven || fl.Name == "vs" })
	if vsGiven {
		if err := bench.ValidateVersus(o.Scenario, f.vs); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Dispatchers, err = parseCounts("--dispatchers", f.dispatchers); err != nil {
		errs = append(errs, err)
	}
	if o.Sizes, err = parseCounts("--sizes", f.sizes); err != nil {
		errs = append(errs, err)
	}
	if o.Progress == 0 {
		o.Progress = -1 // off; zero would mean the default
	}
	o.RedisNodes = e.benchRedisNodes(*f.redisURL)
	o.Out, o.Log = e.Stdout, e.Stderr
	if err := errors.Join(errs...); err != nil {
		return nil, &usageError{err: err}
	}
	if err := bench.Normalize(*o).Validate(); err != nil {
		return nil, &usageError{err: err}
	}
	if f.vs != "" {
		// The second run takes the same flags: check them for its scenario too, before the first runs.
		vo := *o
		vo.Scenario = f.vs
		if err := bench.Normalize(vo).Validate(); err != nil {
			return nil, &usageError{err: fmt.Errorf("--vs %s: %w", f.vs, err)}
		}
	}
	return f, nil
}

// benchRedisNodes picks the lock nodes as env.redisNodes does (--redis-url, else $REDIS_URL, else
// the local default), as addresses: the bench makes clients for each dispatcher, or spawns nodes.
func (e *env) benchRedisNodes(flagValue string) []string {
	v := flagValue
	if v == "" {
		v = e.Getenv("REDIS_URL")
	}
	if v == "" {
		v = defaultRedisURL
	}
	return strings.Split(v, ",")
}

// parseCounts parses a comma-separated list of positive counts, allowing k and M suffixes.
func parseCounts(flagName, s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		p, mult := strings.TrimSpace(part), 1
		switch {
		case strings.HasSuffix(p, "k"):
			p, mult = strings.TrimSuffix(p, "k"), 1_000
		case strings.HasSuffix(p, "M"):
			p, mult = strings.TrimSuffix(p, "M"), 1_000_000
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive count (write e.g. 1,3,5 or 10k,1M)", flagName, part)
		}
		if n > math.MaxInt/mult {
			return nil, fmt.Errorf("%s: %q is too large a count", flagName, part) // n*mult would wrap around
		}
		out = append(out, n*mult)
	}
	return out, nil
}

func runBench(ctx context.Context, e *env, args []string) error {
	f, err := parseBench(e, args)
	if err != nil {
		return err
	}
	if f.cpuprofile != "" {
		stop, err := startCPUProfile(f.cpuprofile)
		if err != nil {
			return err
		}
		defer stop()
	}
	db, err := e.connect(ctx, *f.dbURL)
	if err != nil {
		return err
	}
	f.opts.DB = db.Config()
	db.Close()
	report, err := bench.Run(ctx, f.opts)
	if err != nil {
		return err
	}
	var other *bench.Report
	if f.vs != "" {
		if other, err = runVersus(ctx, e, f, report); err != nil {
			return err
		}
	}
	if f.json != "" {
		if err := writeBenchJSON(f.json, report); err != nil {
			return err
		}
	}
	if other != nil {
		other.Print(e.Stdout, f.opts.Explain)
	}
	report.Print(e.Stdout, f.opts.Explain)
	for _, r := range []*bench.Report{other, report} {
		if r != nil && r.Failed() {
			return fmt.Errorf("bench %s: the accounting failed: %s", r.Scenario, strings.Join(r.Failures, "; "))
		}
	}
	return nil
}

// runVersus runs the scenario of --vs after first, on the same job count, and appends the
// comparison to first's RESULT pairs. When the second run cannot finish, first's report is printed
// before the error, so its figures are not lost.
func runVersus(ctx context.Context, e *env, f *benchFlags, first *bench.Report) (*bench.Report, error) {
	other, err := bench.Run(ctx, bench.VersusOptions(f.opts, first, f.vs))
	if err == nil {
		err = first.Versus(other)
	}
	if err != nil {
		first.Print(e.Stdout, f.opts.Explain)
		return nil, fmt.Errorf("bench %s --vs %s: %w", first.Scenario, f.vs, err)
	}
	return other, nil
}

func writeBenchJSON(path string, r *bench.Report) error {
	file, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	if err := r.WriteJSON(file); err != nil {
		file.Close()
		return fmt.Errorf("--json: writing %s: %w", path, err)
	}
	return file.Close()
}

func startCPUProfile(path string) (stop func(), err error) {
	file, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(file); err != nil {
		file.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		file.Close()
	}, nil
}
