package cli

import (
	"context"
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/limits"
)

var limitUsage = `usage: jobpipe limit set KIND N [--key VALUE | --per-key] [--json] [--database-url URL]
       jobpipe limit get KIND [--key VALUE] [--json] [--database-url URL]
       jobpipe limit list [KIND] [--json] [--database-url URL]
       jobpipe limit clear KIND [--key VALUE | --per-key | --total] [--json] [--database-url URL]

Reads and changes the running limits of job kinds while dispatchers run: no deploy, no restart.
Running dispatchers apply a change at once. Lowering a limit never stops a running job: running jobs
finish, and no new job starts above the new limit until enough of them have.

Three limits apply to a kind:
  total    at most N of its jobs run at once, across every dispatcher (default: none)
  per-key  at most N jobs of one key value run at once (default: the kind's configured key limit)
  key      the limit of one key value, which wins over the per-key default in either direction
N = 0 halts; "jobpipe pause" halts too, keeping the limits for "jobpipe resume".

A key value is the text of the kind's key column (42, acme); for a key of several columns, a JSON
array of the values: --key '["acme", 42]'.

subcommands:
  set KIND N   set the kind's total (0 to ` + maxTotalText + `); with --per-key its per-key default,
               with --key VALUE that key's limit (0 to ` + maxKeyText + `)
  get KIND     show what is stored and what is in force; with --key VALUE, for that key
  list [KIND]  every registered kind's limits, then every key that has its own
  clear KIND   remove the kind's total and per-key default (--total or --per-key: only that one);
               with --key VALUE, that key's limit: the per-key default applies to it again

flags:
  --key VALUE         one key value of the kind
  --per-key           the kind's per-key default
  --total             (clear) the kind's total only
  --json              print JSON instead of text (fields in docs/cli.md)
  --database-url URL  the database (default $DATABASE_URL, else ` + defaultDatabaseURL + `)
`

const pauseUsage = `usage: jobpipe pause KIND [--key VALUE] [--json] [--database-url URL]

Halts the kind, or with --key one key value of it: no new job starts until "jobpipe resume". Jobs
already running are not stopped: they finish. The limits are kept for when it resumes.

flags:
  --key VALUE         one key value of the kind (JSON array for a key of several columns)
  --json              print JSON instead of text (fields in docs/cli.md)
  --database-url URL  the database (default $DATABASE_URL, else ` + defaultDatabaseURL + `)
`

const resumeUsage = `usage: jobpipe resume KIND [--key VALUE] [--json] [--database-url URL]

Undoes "jobpipe pause": the kind's (or with --key the key's) limits apply again.

flags:
  --key VALUE         one key value of the kind (JSON array for a key of several columns)
  --json              print JSON instead of text (fields in docs/cli.md)
  --database-url URL  the database (default $DATABASE_URL, else ` + defaultDatabaseURL + `)
`

var (
	maxTotalText = strconv.Itoa(limits.MaxMaxRunning)
	maxKeyText   = strconv.Itoa(limits.MaxKeyLimit)
)

func init() {
	register(&command{name: "limit", summary: "show and change the running limits of job kinds and keys", usage: limitUsage, run: runLimit})
	register(&command{name: "pause", summary: "stop starting jobs of a kind or key (running jobs finish)", usage: pauseUsage,
		run: func(ctx context.Context, e *env, args []string) error { return runPause(ctx, e, "pause", args) }})
	register(&command{name: "resume", summary: "start jobs of a paused kind or key again", usage: resumeUsage,
		run: func(ctx context.Context, e *env, args []string) error { return runPause(ctx, e, "resume", args) }})
}

// limitFlags are the flags of the limit, pause and resume commands; each defines those it takes.
type limitFlags struct {
	fs     *flag.FlagSet
	dbURL  *string
	json   *bool
	key    *string
	perKey *bool
	total  *bool
}

// newLimitFlags defines --database-url and --json, and those of key, per-key and total that are
// true.
func newLimitFlags(name string, key, perKey, total bool) *limitFlags {
	f := &limitFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.dbURL = databaseURLFlag(f.fs)
	f.json = f.fs.Bool("json", false, "print JSON")
	if key {
		f.key = f.fs.String("key", "", "one key value of the kind")
	}
	if perKey {
		f.perKey = f.fs.Bool("per-key", false, "the kind's per-key default")
	}
	if total {
		f.total = f.fs.Bool("total", false, "the kind's total only")
	}
	return f
}

// parse parses args and checks that the positional arguments number from min to max (named by
// what) and that at most one of --key, --per-key and --total is given.
func (f *limitFlags) parse(args []string, min, max int, what string) ([]string, error) {
	pos, err := parseFlags(f.fs, args)
	if err != nil {
		return nil, err
	}
	switch {
	case len(pos) < min:
		return nil, f.usagef("missing %s", what)
	case len(pos) > max:
		return nil, f.usagef("unexpected argument %q; want %s", pos[max], what)
	}
	var given []string
	f.fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "key" || fl.Name == "per-key" || fl.Name == "total" {
			given = append(given, "--"+fl.Name)
		}
	})
	if len(given) > 1 {
		return nil, f.usagef("%s and %s contradict each other: give one", given[0], given[1])
	}
	return pos, nil
}

func (f *limitFlags) usagef(format string, args ...any) error {
	return &usageError{where: f.fs.Name(), err: fmt.Errorf(format, args...)}
}

// keyArg is the --key value, or nil when --key was not given (an empty value is a key: "").
func (f *limitFlags) keyArg() *string {
	if f.key == nil {
		return nil
	}
	var key *string
	f.fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "key" {
			key = f.key
		}
	})
	return key
}

func runLimit(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef("missing subcommand; want set, get, list or clear")
	}
	if isHelpFlag(args[0]) {
		return flag.ErrHelp
	}
	switch args[0] {
	case "set":
		return limitSet(ctx, e, args[1:])
	case "get":
		return limitGet(ctx, e, args[1:])
	case "list":
		return limitList(ctx, e, args[1:])
	case "clear":
		return limitClear(ctx, e, args[1:])
	}
	return usagef("unknown subcommand %q; want set, get, list or clear", args[0])
}

// negativeArg is an argument the flag package would take for an unknown flag, -1.
var negativeArg = regexp.MustCompile(`^-[0-9]+$`)

// negativesLast moves negative numbers among args behind "--", where parseFlags takes them as
// positional: "limit set KIND -1" is then refused for its negative N, not for an unknown flag -1.
// The values of --key and --database-url stay where they are: a key may well be -1.
func negativesLast(args []string) []string {
	var out, neg []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			out = append(out, args[i:]...)
			return append(out, neg...)
		case (a == "--key" || a == "-key" || a == "--database-url" || a == "-database-url") && i+1 < len(args):
			out = append(out, a, args[i+1])
			i++
		case negativeArg.MatchString(a):
			neg = append(neg, a)
		default:
			out = append(out, a)
		}
	}
	if len(neg) == 0 {
		return out
	}
	return append(append(out, "--"), neg...)
}

// wholeNumber is the text of an integer, sign and digits only.
var wholeNumber = regexp.MustCompile(`^[+-]?[0-9]+$`)

func limitSet(ctx context.Context, e *env, args []string) error {
	f := newLimitFlags("limit set", true, true, false)
	pos, err := f.parse(negativesLast(args), 2, 2, "KIND and N")
	if err != nil {
		return err
	}
	kind, key, perKey := pos[0], f.keyArg(), *f.perKey
	maxN, what := limits.MaxMaxRunning, "a total limit"
	if key != nil || perKey {
		maxN, what = limits.MaxKeyLimit, "a per-key limit"
	}
	if !wholeNumber.MatchString(pos[1]) {
		// Quoted: a value such as "5\n", printed bare, would break the message's line.
		return f.usagef("N %q is not a whole number: give 0 (halt) to %d", pos[1], maxN)
	}
	// A whole number beyond int's range reads as int's nearest end, which is out of range here too.
	n, _ := strconv.Atoi(pos[1])
	switch {
	case n > maxN:
		return f.usagef("N %s is too large for %s: give 0 (halt) to %d", pos[1], what, maxN)
	case n < 0:
		return f.usagef("N %s is negative: give 0 (halt) to %d", pos[1], maxN)
	}
	switch {
	case key != nil:
		return change(ctx, e, f, kind, key,
			func(pool *pgxpool.Pool, _ state) error { return limits.SetKey(ctx, pool, kind, *key, n) },
			func(was, _ state) string {
				return fmt.Sprintf("key %s limit %d (was: %s)", quoteKey(was.kind, was.key.Value), n, keyLimitText(was))
			})
	case perKey:
		return change(ctx, e, f, kind, nil,
			func(pool *pgxpool.Pool, _ state) error { return limits.SetKeyLimit(ctx, pool, kind, n) },
			func(was, _ state) string { return fmt.Sprintf("per-key default %d (was: %s)", n, perKeyText(was.kind)) })
	}
	return change(ctx, e, f, kind, nil,
		func(pool *pgxpool.Pool, _ state) error { return limits.SetMaxRunning(ctx, pool, kind, n) },
		func(was, _ state) string { return fmt.Sprintf("total limit %d (was: %s)", n, storedTotal(was.kind)) })
}

func limitClear(ctx context.Context, e *env, args []string) error {
	f := newLimitFlags("limit clear", true, true, true)
	pos, err := f.parse(args, 1, 1, "KIND")
	if err != nil {
		return err
	}
	kind, key, perKey, total := pos[0], f.keyArg(), *f.perKey, *f.total
	if key != nil {
		return change(ctx, e, f, kind, key,
			func(pool *pgxpool.Pool, _ state) error { return limits.ClearKey(ctx, pool, kind, *key) },
			func(was, now state) string {
				return fmt.Sprintf("key %s limit cleared: %s applies (was: %s)", quoteKey(was.kind, was.key.Value), keyLimitText(now), keyLimitText(was))
			})
	}
	clearTotal := total || !perKey
	// Without a flag, a kind has its per-key default cleared too, if it has a key to have one.
	clearPerKey := func(was state) bool { return perKey || (!total && len(was.kind.KeyColumns) > 0) }
	return change(ctx, e, f, kind, nil,
		func(pool *pgxpool.Pool, was state) error {
			// Both or neither, and one notification for the dispatchers.
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if clearTotal {
					if err := limits.ClearMaxRunning(ctx, tx, kind); err != nil {
						return err
					}
				}
				if clearPerKey(was) {
					return limits.ClearKeyLimit(ctx, tx, kind)
				}
				return nil
			})
		},
		func(was, now state) string {
			var parts []string
			if clearTotal {
				parts = append(parts, fmt.Sprintf("total limit cleared: %s (was: %s)", totalApplies(now.kind), storedTotal(was.kind)))
			}
			if clearPerKey(was) {
				parts = append(parts, fmt.Sprintf("per-key default cleared: %s applies (was: %s)", perKeyText(now.kind), perKeyText(was.kind)))
			}
			return strings.Join(parts, "; ")
		})
}

func runPause(ctx context.Context, e *env, name string, args []string) error {
	f := newLimitFlags(name, true, false, false)
	pos, err := f.parse(args, 1, 1, "KIND")
	if err != nil {
		return err
	}
	kind, key, pause := pos[0], f.keyArg(), name == "pause"
	do := func(pool *pgxpool.Pool, _ state) error {
		switch {
		case key != nil && pause:
			return limits.PauseKey(ctx, pool, kind, *key)
		case key != nil:
			return limits.ResumeKey(ctx, pool, kind, *key)
		case pause:
			return limits.Pause(ctx, pool, kind)
		}
		return limits.Resume(ctx, pool, kind)
	}
	return change(ctx, e, f, kind, key, do, func(was, now state) string {
		subject, wasPaused, applies := "", was.kind.Paused, totalApplies(now.kind)
		if key != nil {
			subject, wasPaused, applies = "key "+quoteKey(was.kind, was.key.Value)+" ", was.key.Paused, keyLimitText(now)+" applies"
		}
		if pause {
			return fmt.Sprintf("%spaused (was: %s)", subject, pausedText(wasPaused))
		}
		return fmt.Sprintf("%sresumed: %s (was: %s)", subject, applies, pausedText(wasPaused))
	})
}

// change connects, reads the state of kind (and key), applies do, reads the state again and prints
// "KIND: " and what describe says of the change, then the notes about it. Reading first refuses an
// unknown kind or a malformed key before anything is written.
func change(ctx context.Context, e *env, f *limitFlags, kind string, key *string,
	do func(pool *pgxpool.Pool, was state) error, describe func(was, now state) string) error {
	pool, err := e.connect(ctx, *f.dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	was, err := readState(ctx, pool, kind, key)
	if err != nil {
		return unknownKind(ctx, pool, f.fs.Name(), kind, err)
	}
	if err := do(pool, was); err != nil {
		return err
	}
	now, err := readState(ctx, pool, kind, key)
	if err != nil {
		return err
	}
	msg := kind + ": " + describe(was, now)
	notes := changeNotes(was, now)
	if *f.json {
		return writeJSON(e, changeJSON{Message: msg, Notes: notes, Before: was.json(), After: now.json()})
	}
	fmt.Fprintln(e.Stdout, msg)
	for _, n := range notes {
		fmt.Fprintln(e.Stdout, "note: "+n)
	}
	return nil
}

func limitGet(ctx context.Context, e *env, args []string) error {
	f := newLimitFlags("limit get", true, false, false)
	pos, err := f.parse(args, 1, 1, "KIND")
	if err != nil {
		return err
	}
	pool, err := e.connect(ctx, *f.dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := readState(ctx, pool, pos[0], f.keyArg())
	if err != nil {
		return unknownKind(ctx, pool, f.fs.Name(), pos[0], err)
	}
	if *f.json {
		return writeJSON(e, getJSON{stateJSON: st.json(), StoredKeys: st.storedKeys, KeysWithLimit: st.keysWithLimit})
	}
	return writeState(e, st)
}

func limitList(ctx context.Context, e *env, args []string) error {
	f := newLimitFlags("limit list", false, false, false)
	pos, err := f.parse(args, 0, 1, "at most one KIND")
	if err != nil {
		return err
	}
	kind := ""
	if len(pos) == 1 {
		kind = pos[0]
	}
	pool, err := e.connect(ctx, *f.dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	kinds, keys, err := limits.List(ctx, pool, kind)
	if err != nil {
		return unknownKind(ctx, pool, f.fs.Name(), kind, err)
	}
	if *f.json {
		return writeJSON(e, listJSON(kinds, keys))
	}
	return writeList(e, kinds, keys)
}

// state is what is stored for a kind and, when a key was named, for that key.
type state struct {
	kind          limits.Kind
	key           *limits.Key // nil when no key was named
	storedKeys    int         // how many keys of the kind have something stored
	keysWithLimit int         // how many of them have a limit of their own
}

func readState(ctx context.Context, pool *pgxpool.Pool, kind string, key *string) (state, error) {
	kinds, keys, err := limits.List(ctx, pool, kind)
	if err != nil {
		return state{}, err
	}
	st := state{kind: kinds[0], storedKeys: len(keys)}
	for _, k := range keys {
		if k.Limit != nil {
			st.keysWithLimit++
		}
	}
	if key != nil {
		k, err := limits.GetKey(ctx, pool, kind, *key)
		if err != nil {
			return state{}, err
		}
		st.key = &k
	}
	return st, nil
}
