// Command river runs jobpipe's drain, steady and rate benchmarks (docs/benchmarks.md) on River, drain
// and steady configured as River's own `river bench` configures itself, and prints a RESULT line in
// jobpipe's format, so that `make bench-peers` can compare the two back to back on one machine.
//
// It is a module of its own, so that jobpipe never depends on River.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/riverqueue/river"
)

const usage = `usage: go run . drain|steady|rate [flags]

Runs one of jobpipe's scenarios on River, in a schema of its own (River's migrations applied by
rivermigrate, created afresh and dropped at the end unless --keep). drain and steady use River's own
benchmark configuration: one client, MaxWorkers 2000 on the default queue, FetchCooldown 2ms,
FetchPollInterval 20ms, InsertMany batches of 5000, a pgxpool with pgx's defaults, a worker that
only counts its runs. rate uses one client of --workers (32), FetchCooldown --fetch-cooldown (1ms,
River's advice for low latency) and River's default FetchPollInterval. It writes progress lines to
stderr, then the settings and one RESULT line in jobpipe's format to stdout, e.g.
  RESULT scenario=drain peer=river jobs=1000000 ... jobs_per_s=21000 ... duplicates=0 lost=0 early=0 verified=true

scenarios:
  drain   insert --jobs jobs, then time the client working them all (start to the last completion)
  steady  work for --duration while a producer keeps about --backlog jobs waiting; the rate is the
          completions in that window. Then the producer stops and the rest is worked
  rate    jobpipe's rate: --rate jobs per second for --duration, each with a 256-byte payload and
          its own InsertTx and commit, from jobpipe's number of callers (one per 25 jobs/s, 2 to
          32), each on a connection of its own, on a fixed schedule; a worker that sleeps --handler.
          Over the window from the first job due to the last completed: insert-to-start p50/p99,
          CPU time per job of this process, of the PostgreSQL backends serving the run and of the
          machine (from /proc), and the database's transactions per job. Runs in a database of its
          own named after --schema; needs the server on this machine and its processes readable
All count each job's worker runs and check them against river_job at the end: duplicates (jobs run
more than once) and lost (never run, or not completed) must be 0, or the command exits 1.

flags (defaults in brackets):
  --database-url URL    PostgreSQL [$DATABASE_URL, else ` + defaultDatabaseURL + `]
  --schema NAME         the schema the run owns (rate: and its database) [river_bench]
  --keep                keep the schema (and rate's database) at the end
  --jobs N              drain: jobs [1000000]
  --duration D          steady: the measured window [60s]; rate: how long to insert [5m]
  --backlog N           steady: waiting jobs to keep [75000]
  --rate N              rate: jobs inserted per second [600]
  --workers N           the default queue's MaxWorkers [drain, steady 2000; rate 32]
  --handler D           rate: how long the worker sleeps [1ms]
  --fetch-cooldown D    the client's FetchCooldown, at least 1ms [drain, steady 2ms; rate 1ms]
  --no-analyze          do not ANALYZE river_job after loading it (jobpipe's bench does by default,
                        standing in for a stock server's auto-analyze)
  --progress D          interval of the progress lines; 0 turns them off [1s]
  --timeout D           give up after this long [30m]

Exit status: 0 when the run finished and its accounting holds, 1 when it failed, 2 for a bad command line.
`

const defaultDatabaseURL = "postgres://127.0.0.1:5432/postgres?sslmode=disable"

// options is the command line.
type options struct {
	scenario      string
	databaseURL   string
	schema        string
	keep          bool
	jobs          int
	duration      time.Duration
	backlog       int
	rate          int
	workers       int
	handler       time.Duration
	fetchCooldown time.Duration
	noAnalyze     bool
	progress      time.Duration
	timeout       time.Duration
}

// The defaults that differ by scenario: drain and steady take River's own benchmark configuration,
// rate jobpipe's rate scenario's load.
const (
	defaultSteadyDuration = 60 * time.Second
	defaultRateDuration   = 5 * time.Minute
	defaultRate           = 600
	defaultRateWorkers    = 32
	defaultRateCooldown   = time.Millisecond // River's advice for low latency
	defaultHandler        = time.Millisecond
	maxRate               = 100_000
)

// scenarios are the scenarios this command runs.
var scenarios = []string{"drain", "steady", "rate"}

// usageError is a bad command line: exit status 2, with the usage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }

func (e *usageError) Unwrap() error { return e.err }

func parse(args []string, getenv func(string) string) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("river", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.databaseURL, "database-url", "", "")
	fs.StringVar(&o.schema, "schema", "river_bench", "")
	fs.BoolVar(&o.keep, "keep", false, "")
	fs.IntVar(&o.jobs, "jobs", 1_000_000, "")
	fs.DurationVar(&o.duration, "duration", 0, "")
	fs.IntVar(&o.backlog, "backlog", 75_000, "")
	fs.IntVar(&o.rate, "rate", defaultRate, "")
	fs.IntVar(&o.workers, "workers", 0, "")
	fs.DurationVar(&o.handler, "handler", defaultHandler, "")
	fs.DurationVar(&o.fetchCooldown, "fetch-cooldown", 0, "")
	fs.BoolVar(&o.noAnalyze, "no-analyze", false, "")
	fs.DurationVar(&o.progress, "progress", time.Second, "")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "")
	// Flags may follow the scenario, as in jobpipe bench.
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return o, &usageError{err}
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	switch {
	case len(pos) == 0:
		return o, &usageError{errors.New("missing the scenario: drain, steady or rate")}
	case len(pos) > 1:
		return o, &usageError{fmt.Errorf("too many arguments %q: give one scenario", pos)}
	case !slices.Contains(scenarios, pos[0]):
		return o, &usageError{fmt.Errorf("unknown scenario %q: want drain, steady or rate", pos[0])}
	}
	o.scenario = pos[0]
	if o.databaseURL == "" {
		o.databaseURL = getenv("DATABASE_URL")
	}
	if o.databaseURL == "" {
		o.databaseURL = defaultDatabaseURL
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	def := func(name string, p *time.Duration, v time.Duration) {
		if !given[name] {
			*p = v
		}
	}
	if o.scenario == "rate" {
		def("duration", &o.duration, defaultRateDuration)
		def("fetch-cooldown", &o.fetchCooldown, defaultRateCooldown)
		if !given["workers"] {
			o.workers = defaultRateWorkers
		}
	} else {
		def("duration", &o.duration, defaultSteadyDuration)
		def("fetch-cooldown", &o.fetchCooldown, fetchCooldown)
		if !given["workers"] {
			o.workers = maxWorkers
		}
	}
	var errs []error
	if o.jobs < 1 || o.jobs > maxLedgerJobs {
		errs = append(errs, fmt.Errorf("--jobs must be from 1 to %d, not %d", maxLedgerJobs, o.jobs))
	}
	if o.backlog < 1 || o.backlog > maxLedgerJobs {
		errs = append(errs, fmt.Errorf("--backlog must be from 1 to %d, not %d", maxLedgerJobs, o.backlog))
	}
	if o.duration <= 0 || o.timeout <= 0 || o.handler <= 0 {
		errs = append(errs, errors.New("--duration, --timeout and --handler must be positive"))
	}
	if o.rate < 1 || o.rate > maxRate {
		errs = append(errs, fmt.Errorf("--rate must be from 1 to %d jobs/s, not %d", maxRate, o.rate))
	} else if n := rateJobs(o.rate, o.duration); o.scenario == "rate" && o.duration > 0 && (n < 1 || n > maxLedgerJobs) {
		errs = append(errs, fmt.Errorf("--rate times --duration must come to 1 to %d jobs, not %d", maxLedgerJobs, n))
	}
	// River's own bounds (QueueConfig.MaxWorkers, Config.FetchCooldown), said here with the flag's name.
	if o.workers < 1 || o.workers > 10_000 {
		errs = append(errs, fmt.Errorf("--workers must be from 1 to 10000, not %d", o.workers))
	}
	if o.fetchCooldown < river.FetchCooldownMin {
		errs = append(errs, fmt.Errorf("--fetch-cooldown must be at least %v (River's minimum), not %v", river.FetchCooldownMin, o.fetchCooldown))
	}
	if !validSchema(o.schema) {
		errs = append(errs, fmt.Errorf("--schema %q: want 1 to 63 lower-case letters, digits and underscores, starting with a letter", o.schema))
	}
	if o.progress == 0 {
		o.progress = -1 // off
	}
	if err := errors.Join(errs...); err != nil {
		return o, &usageError{err}
	}
	return o, nil
}

// validSchema accepts the names that need no quoting, so the schema is written into SQL as is and
// River's Schema rules (letters, digits, underscores) hold too.
func validSchema(s string) bool {
	if s == "" || len(s) > 63 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	o, err := parse(args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "river bench: %v\n\n%s", err, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	r, err := runScenario(ctx, o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "river bench %s: %v\n", o.scenario, err)
		return 1
	}
	r.print(stdout)
	if len(r.failures) > 0 {
		fmt.Fprintf(stderr, "river bench %s: the accounting failed: %s\n", o.scenario, strings.Join(r.failures, "; "))
		return 1
	}
	return 0
}

// runScenario opens the run's schema, runs the scenario and drops the schema, whatever happens.
func runScenario(ctx context.Context, o options, log io.Writer) (*report, error) {
	s, err := open(ctx, o, log)
	if err != nil {
		return nil, err
	}
	defer s.close(ctx)
	s.settings(ctx)
	switch o.scenario {
	case "drain":
		err = s.drain(ctx)
	case "steady":
		err = s.steady(ctx)
	default:
		err = s.runRate(ctx)
	}
	if err != nil {
		return nil, err
	}
	s.report.result("verified", len(s.report.failures) == 0)
	return s.report, nil
}
