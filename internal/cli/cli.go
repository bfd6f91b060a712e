package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// Exit codes of Run.
const (
	exitOK      = 0 // the command did what was asked
	exitFailure = 1 // the command ran and failed: the database, a file, a wrong value
	exitUsage   = 2 // the command line's shape was wrong: unknown command or flag, missing or extra argument
)

// env is all a command may use of the outside world, so tests can run commands in-process.
type env struct {
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(key string) string // os.Getenv outside tests
	Now    func() time.Time        // time.Now outside tests

	// defaultDatabaseURL replaces the fallback URL when not empty, so tests can use the fallback
	// without touching the postgres database.
	defaultDatabaseURL string
	// used is the database the command connected to (set by connect), for messages.
	used *usedDatabase
}

// command is one subcommand of jobpipe. Each lives in its own file and registers itself from that
// file's init, so adding one touches no central list.
type command struct {
	name    string // what follows "jobpipe", e.g. "migrate"
	summary string // one line for the list in "jobpipe help"
	usage   string // the full help, starting "usage: jobpipe NAME ..."; printed by "jobpipe help NAME" and after usage errors
	// run does the work. args exclude the command's name. It returns a usageError (see usagef and
	// parseFlags) when the command line is wrong, flag.ErrHelp to print usage and succeed, and any
	// other error to report a failure.
	run func(ctx context.Context, e *env, args []string) error
}

// commands holds every registered command by name.
var commands = map[string]*command{}

// register adds c to the commands; call it from an init function in c's file.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("cli: command " + c.name + " registered twice")
	}
	commands[c.name] = c
}

// usageError is a command line of the wrong shape: Run prints it with the command's usage and
// exits with 2.
type usageError struct {
	where string // what to name in the message, e.g. "migrate up"; the command's name when empty
	err   error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError for the command that returns it.
func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// Run runs the jobpipe command line args (without the program name), writing to stdout and
// stderr, and returns the exit code: 0 on success, 1 when the command failed, 2 when the command
// line was wrong.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return run(ctx, &env{Stdout: stdout, Stderr: stderr, Getenv: os.Getenv, Now: time.Now}, args)
}

func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(e.Stderr, mainUsage())
		return exitUsage
	}
	name := args[0]
	if isHelpFlag(name) {
		name = "help"
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(e.Stderr, "jobpipe: unknown command %q\n\n%s", name, mainUsage())
		return exitUsage
	}
	return report(e, c, c.run(ctx, e, args[1:]))
}

// report prints err as its kind demands and returns the exit code.
func report(e *env, c *command, err error) int {
	var ue *usageError
	var pe *placedError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(e.Stdout, c.usage)
		return exitOK
	case errors.As(err, &ue):
		where := ue.where
		if where == "" {
			where = c.name
		}
		fmt.Fprintf(e.Stderr, "jobpipe %s: %v\n\n%s", where, ue.err, c.usage)
		return exitUsage
	case errors.As(err, &pe):
		fmt.Fprintf(e.Stderr, "jobpipe %s: %v\n", pe.where, pe.err)
		return exitFailure
	case e.used != nil && jobpipeTablesMissing(err):
		fmt.Fprintf(e.Stderr, "jobpipe: jobpipe's tables are missing in %s (%s): run \"jobpipe migrate up\" on it%s\n",
			e.used, e.used.origin(), otherDatabaseHint(e.used))
		return exitFailure
	case e.used != nil && errors.Is(err, admin.ErrTableMissing):
		fmt.Fprintf(e.Stderr, "jobpipe: %v\njobpipe: (looked in %s, %s)\n", err, e.used, e.used.origin())
		return exitFailure
	default:
		fmt.Fprintf(e.Stderr, "jobpipe: %v\n", err)
		return exitFailure
	}
}

// jobpipeTables are jobpipe's own tables, which its migrations create.
var missingJobpipeTable = regexp.MustCompile(`relation "jobpipe_(kinds|kind_limits|key_limits|leaders|schedules|schedule_firings)" does not exist`)

// jobpipeTablesMissing reports whether err says that jobpipe's own tables are missing: the
// database is not migrated, or not the one meant.
func jobpipeTablesMissing(err error) bool {
	var pgErr *pgconn.PgError
	return errors.Is(err, jobinfo.ErrNotMigrated) ||
		errors.As(err, &pgErr) && pgErr.Code == "42P01" && missingJobpipeTable.MatchString(pgErr.Message)
}

// otherDatabaseHint is said when the fallback URL was used: the database meant is likely another.
func otherDatabaseHint(d *usedDatabase) string {
	if d.from != fromDefault {
		return ""
	}
	return ", or point --database-url or DATABASE_URL at your application's database"
}

func isHelpFlag(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}

// parseFlags parses args with fs, allowing flags after positional arguments ("create NAME --dir
// DIR"), and returns the positional arguments. Errors are usageErrors naming fs; -h gives
// flag.ErrHelp. fs must use flag.ContinueOnError.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	// The flag package prints errors and usage itself; Run prints them with the command's usage.
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{where: fs.Name(), err: err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		// "--" ends the flags: everything after it is positional.
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

func mainUsage() string {
	var b strings.Builder
	b.WriteString("usage: jobpipe <command> [arguments]\n\njobpipe keeps background jobs in PostgreSQL.\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	slices.Sort(names)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, name := range names {
		fmt.Fprintf(tw, "  %s\t%s\n", name, commands[name].summary)
	}
	tw.Flush()
	b.WriteString("\nRun \"jobpipe help <command>\" for a command's usage.\n")
	return b.String()
}

func init() {
	register(&command{
		name:    "help",
		summary: "show this help, or a command's usage",
		usage:   "usage: jobpipe help [command]\n\nShows the list of commands, or the usage of one.\n",
		run: func(_ context.Context, e *env, args []string) error {
			switch len(args) {
			case 0:
				fmt.Fprint(e.Stdout, mainUsage())
				return nil
			case 1:
				c, ok := commands[args[0]]
				if !ok {
					return usagef("unknown command %q; run \"jobpipe help\" for the list", args[0])
				}
				fmt.Fprint(e.Stdout, c.usage)
				return nil
			}
			return usagef("too many arguments: %q; give one command name", args)
		},
	})
}
