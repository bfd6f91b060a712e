package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/admin"
)

const jobsUsage = `usage: jobpipe jobs list KIND [--state S] [--key VALUE] [--limit N] [--before ID] [--json]
       jobpipe jobs show KIND ID [--json]
       jobpipe jobs retry KIND (ID... | --all-failed) [--progress auto|always|never] [--json]
       jobpipe jobs discard KIND ID... [--reason TEXT] [--json]
       jobpipe jobs run-now KIND ID... [--json]

Inspects and changes the jobs of a kind. Every command also takes --database-url URL.

subcommands:
  list KIND     the newest jobs first, N at most (default 50, at most 1000); --state waiting, running,
                processed or failed; --key one key value (a JSON array for a key of several columns);
                --before ID for the next page: the jobs older than ID
  show KIND ID  one job: its data, attempts, last error, timestamps and lease holder
  retry         failed or processed jobs wait again, due now. Attempts are kept: a job that used all
                its attempts gets one more. --all-failed retries every failed job of the kind, in
                batches, drawing a progress bar
  discard       waiting jobs (due, scheduled or retrying) fail for good now, with last error
                "discarded by an operator" and --reason's text
  run-now       waiting jobs scheduled for later become due now

A job in another state is left as it is, and the reason is printed. A running job is never changed:
its worker decides how it ends. Nothing is changed when an argument is wrong.

flags:
  --json              print JSON instead of text (fields in docs/cli.md)
  --database-url URL  the database (default $DATABASE_URL, else ` + defaultDatabaseURL + `)
`

func init() {
	register(&command{name: "jobs", summary: "list, show, retry, discard or run now the jobs of a kind", usage: jobsUsage, run: runJobs})
}

func runJobs(ctx context.Context, e *env, args []string) error {
	const want = "want list, show, retry, discard or run-now"
	if len(args) == 0 {
		return usagef("missing subcommand; %s", want)
	}
	if isHelpFlag(args[0]) {
		return flag.ErrHelp
	}
	switch args[0] {
	case "list":
		return jobsList(ctx, e, args[1:])
	case "show":
		return jobsShow(ctx, e, args[1:])
	case "retry", "discard", "run-now":
		return jobsAct(ctx, e, args[0], args[1:])
	}
	return usagef("unknown subcommand %q; %s", args[0], want)
}

// jobsFlags are the flags every jobs subcommand takes.
type jobsFlags struct {
	fs    *flag.FlagSet
	dbURL *string
	json  *bool
}

func newJobsFlags(sub string) *jobsFlags {
	f := &jobsFlags{fs: flag.NewFlagSet("jobs "+sub, flag.ContinueOnError)}
	f.dbURL = databaseURLFlag(f.fs)
	f.json = f.fs.Bool("json", false, "print JSON")
	return f
}

func (f *jobsFlags) usagef(format string, args ...any) error {
	return &usageError{where: f.fs.Name(), err: fmt.Errorf(format, args...)}
}

// open connects and loads the kind, so that an unknown kind is refused before anything else.
func (f *jobsFlags) open(ctx context.Context, e *env, kind string) (*pgxpool.Pool, *admin.Kind, error) {
	pool, err := e.connect(ctx, *f.dbURL)
	if err != nil {
		return nil, nil, err
	}
	k, err := admin.LoadKind(ctx, pool, kind)
	if err != nil {
		err = unknownKind(ctx, pool, f.fs.Name(), kind, err)
		pool.Close()
		return nil, nil, err
	}
	return pool, k, nil
}

// openForIDs checks the job ids, then opens the kind: ids that are not ids are refused before
// anything connects.
func (f *jobsFlags) openForIDs(ctx context.Context, e *env, kind string, args []string) (*pgxpool.Pool, *admin.Kind, []int64, error) {
	ids, err := parseIDs(args)
	if err != nil {
		return nil, nil, nil, f.usagef("%v", err)
	}
	pool, k, err := f.open(ctx, e, kind)
	return pool, k, ids, err
}

func jobsList(ctx context.Context, e *env, args []string) error {
	f := newJobsFlags("list")
	state := f.fs.String("state", "", "waiting, running, processed or failed")
	key := f.fs.String("key", "", "one key value")
	limit := decimalFlag{n: admin.DefaultLimit, text: strconv.Itoa(admin.DefaultLimit)}
	var before decimalFlag
	f.fs.Var(&limit, "limit", "the most jobs to list")
	f.fs.Var(&before, "before", "list jobs older than this id")
	pos, err := parseFlags(f.fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return f.usagef("want one KIND, got %d arguments", len(pos))
	}
	filter := admin.Filter{Key: *key, BeforeID: before.n}
	if *state != "" {
		if filter.State, err = admin.ParseState(*state); err != nil {
			return f.usagef("--state: %v", err)
		}
	}
	if limit.n < 1 || limit.n > admin.MaxLimit {
		return f.usagef("--limit %s: give 1 to %d", limit.text, admin.MaxLimit)
	}
	filter.Limit = int(limit.n)
	if before.n < 0 {
		return f.usagef("--before %s: give a job id (1 or more)", before.text)
	}
	pool, k, err := f.open(ctx, e, pos[0])
	if err != nil {
		return err
	}
	defer pool.Close()
	jobs, err := admin.ListJobs(ctx, pool, k, filter)
	if err != nil {
		return err
	}
	if *f.json {
		return writeJSON(e, jobsJSON(jobs))
	}
	return writeJobList(e, k, jobs, filter)
}

func jobsShow(ctx context.Context, e *env, args []string) error {
	f := newJobsFlags("show")
	pos, err := parseFlags(f.fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return f.usagef("want KIND and ID, got %d arguments", len(pos))
	}
	pool, k, ids, err := f.openForIDs(ctx, e, pos[0], pos[1:])
	if err != nil {
		return err
	}
	defer pool.Close()
	job, err := admin.GetJob(ctx, pool, k, ids[0])
	if err != nil {
		return err
	}
	if *f.json {
		return writeJSON(e, newJobJSON(job))
	}
	return writeJob(e, k, job)
}

// jobsAct runs retry, discard or run-now.
func jobsAct(ctx context.Context, e *env, sub string, args []string) error {
	f := newJobsFlags(sub)
	var allFailed *bool
	var progress, reason *string
	switch sub {
	case "retry":
		allFailed = f.fs.Bool("all-failed", false, "retry every failed job of the kind")
		progress = progressFlag(f.fs)
	case "discard":
		reason = f.fs.String("reason", "", "why, recorded in the jobs' last error")
	}
	pos, err := parseFlags(f.fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return f.usagef("missing KIND")
	}
	if allFailed != nil && *allFailed {
		if len(pos) > 1 {
			return f.usagef("--all-failed retries every failed job: give no ids with it")
		}
		draw, err := e.progressMode(*progress)
		if err != nil {
			return f.usagef("%v", err)
		}
		return retryAllFailed(ctx, e, f, pos[0], draw)
	}
	if len(pos) == 1 {
		if sub == "retry" {
			return f.usagef("missing job ids; give one or more, or --all-failed")
		}
		return f.usagef("missing job ids; give one or more")
	}
	pool, k, ids, err := f.openForIDs(ctx, e, pos[0], pos[1:])
	if err != nil {
		return err
	}
	defer pool.Close()
	var res admin.ActionResult
	switch sub {
	case "retry":
		res, err = admin.Retry(ctx, pool, k, ids)
	case "discard":
		res, err = admin.Discard(ctx, pool, k, ids, *reason)
	default:
		res, err = admin.RunNow(ctx, pool, k, ids)
	}
	if err != nil {
		return err
	}
	if *f.json {
		return writeJSON(e, newActionJSON(k.Name(), sub, res))
	}
	writeAction(e, k.Name(), sub, res)
	return nil
}

func retryAllFailed(ctx context.Context, e *env, f *jobsFlags, kind string, draw bool) error {
	pool, k, err := f.open(ctx, e, kind)
	if err != nil {
		return err
	}
	defer pool.Close()
	bar := newProgressBar(e, draw, "retrying "+kind)
	n, err := admin.RetryAllFailed(ctx, pool, k, bar.update)
	bar.done()
	if err != nil {
		return fmt.Errorf("%w (%d failed jobs were retried before that)", err, n)
	}
	if *f.json {
		return writeJSON(e, struct {
			Kind    string `json:"kind"`
			Retried int64  `json:"retried"`
		}{kind, n})
	}
	fmt.Fprintf(e.Stdout, "%s: %d failed %s retried\n", kind, n, plural(int(n), "job"))
	return nil
}

// parseIDs reads job ids: positive whole numbers, each once, in the order given.
func parseIDs(args []string) ([]int64, error) {
	ids := make([]int64, 0, len(args))
	for _, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id < 1 {
			return nil, fmt.Errorf("job id %q is not a job id: give whole numbers of 1 or more, as `jobpipe jobs list` shows them", a)
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// joinIDs is "1, 2, 3".
func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}

// decimalFlag is an integer flag read in base 10 only. flag.Int reads "010" as 8 and "0x10" as 16,
// which is never what a person means by a job id or a count; job ids are read in base 10 too. It
// keeps the text as given, so an error about a value in range of int64 but not of the flag ("01001")
// names what the user typed, not its normalised form.
type decimalFlag struct {
	n    int64
	text string
}

func (d *decimalFlag) String() string {
	if d == nil {
		return "0"
	}
	return strconv.FormatInt(d.n, 10)
}

// Set reads s; its errors read as the flag package's own ("invalid value ... for flag -limit: parse
// error").
func (d *decimalFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return errors.New("value out of range")
	case err != nil:
		return errors.New("parse error")
	}
	d.n, d.text = n, s
	return nil
}
