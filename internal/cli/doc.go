// Package cli implements the jobpipe command, in-process and testable: cmd/jobpipe only calls
// [Run] with the arguments, stdout and stderr, and exits with the code it returns.
//
// # Exit codes
//
//   - 0: the command did what was asked (also for "jobpipe help" and -h).
//   - 1: the command ran and failed; Run prints "jobpipe: <error>". Wrong values (a malformed
//     database URL, a --dir that does not exist) are failures too: the error says what to fix.
//   - 2: the command line had the wrong shape (no command, an unknown command, subcommand or
//     flag, a missing or extra argument); Run prints the error and the command's usage.
//
// # Adding a command
//
// Each command lives in its own file, named for it (migrate.go holds "jobpipe migrate"), and
// registers itself from that file's init; nothing central lists the commands:
//
//	func init() {
//		register(&command{
//			name:    "kind",
//			summary: "list and change job kinds", // one line for "jobpipe help"
//			usage:   kindUsage,                    // full help, starting "usage: jobpipe kind ..."
//			run:     runKind,
//		})
//	}
//
//	func runKind(ctx context.Context, e *env, args []string) error {
//		fs := flag.NewFlagSet("kind", flag.ContinueOnError)
//		dbURL := databaseURLFlag(fs)           // --database-url, the same for every command
//		pos, err := parseFlags(fs, args)       // flags may follow positional arguments
//		if err != nil {
//			return err                          // usage error (exit 2) or -h (usage, exit 0)
//		}
//		if len(pos) != 1 {
//			return usagef("want one kind name") // exit 2 with kind's usage
//		}
//		pool, err := e.connect(ctx, *dbURL)     // parses, times out after 5s, pings, explains failures
//		if err != nil {
//			return err
//		}
//		defer pool.Close()
//		...
//		fmt.Fprintln(e.Stdout, "...")          // write to e.Stdout and e.Stderr, never os.Stdout
//		return nil                              // any other error: "jobpipe: <error>", exit 1
//	}
//
// A run function reads the environment through e.Getenv and the clock through e.Now, so tests
// can inject both; tests call Run (or run with their own env) and assert the exit code and the
// exact output.
//
// # Database
//
// Commands that connect take --database-url; without it they use $DATABASE_URL, else
// postgres://127.0.0.1:5432/postgres?sslmode=disable. The URL's search_path selects the schema.
package cli
