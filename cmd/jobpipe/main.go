// Command jobpipe manages jobpipe, the background-job library: migrations, job tables, inspection
// and repair of jobs, limits, pruning, the dashboard and metrics server, the demo and the benchmarks.
//
// Usage:
//
//	jobpipe <command> [arguments]
//
// Commands:
//
//	migrate up|down|status|version [--database-url URL] [--dir DIR]
//	    Applies, rolls back (one step) and reports jobpipe's own migrations, recorded in
//	    jobpipe_db_version, and with --dir the application's goose SQL migrations in DIR,
//	    recorded in goose_db_version. Up applies jobpipe's first; down rolls back DIR's
//	    latest when --dir is given, else jobpipe's.
//	migrate create NAME --dir DIR
//	    Writes an empty goose SQL migration DIR/<UTC timestamp>_NAME.sql.
//	kind new NAME --field COLUMN:TYPE ... [--unique COLS] [--key COLS] [--dir DIR]
//	    Writes the migration that creates a job kind's table (printed without --dir).
//	limit set KIND N [--key VALUE | --per-key]
//	    Sets a kind's total running limit across all workers, its per-key default, or one key
//	    value's limit; 0 halts. Running dispatchers apply it within a second.
//	limit get KIND [--key VALUE] | limit list [KIND] | limit clear KIND [--key VALUE | --per-key | --total]
//	    Shows what is stored and what is in force, or clears it.
//	pause KIND [--key VALUE] | resume KIND [--key VALUE]
//	    Halts a kind or one key value (running jobs finish), and undoes it.
//	kinds
//	    Lists every registered kind with its jobs counted by state, running against its limit,
//	    the oldest waiting job's age and the schedule lag.
//	jobs list KIND [--state S] [--key VALUE] [--limit N] [--before ID] | jobs show KIND ID
//	    Lists a kind's jobs, newest first, or shows one: data, attempts, last error, lease holder.
//	jobs retry|discard|run-now KIND ID... | jobs retry KIND --all-failed
//	    Retries failed jobs, discards waiting ones, or makes scheduled ones due now.
//	enqueue KIND --data JSON [--at TIME | --in DURATION] [--on-duplicate skip|replace|error]
//	    Adds a job, its data checked against the kind's table.
//	prune [KIND] [--older-than D] [--state processed|failed|all]
//	    Deletes finished jobs older than a retention, in small batches.
//	cron list
//	    Lists the recurring jobs with their next and last runs.
//	serve [--addr HOST:PORT] [--read-only]
//	    Serves the web dashboard and the Prometheus metrics at /metrics.
//	demo [--database-url URL] [--redis-url NODES] [--schema NAME] [--jobs N] [--verbose]
//	    Runs the demo pipeline (five kinds, two dispatchers) in a schema of its own and prints
//	    its live progress and a summary it checks itself.
//	bench drain|steady|unique|herd|select|slots|fair|latency|rate|memory [flags]
//	    Runs a benchmark scenario in a schema of its own; it verifies its own accounting and
//	    ends with a RESULT line.
//	help [command]
//	    Prints the list of commands, or one command's full usage.
//
// Commands that connect use --database-url, else $DATABASE_URL, else
// postgres://127.0.0.1:5432/postgres?sslmode=disable; the URL's search_path selects the schema.
// Commands that need Redis use --redis-url, else $REDIS_URL, else 127.0.0.1:6379 (comma-separated
// for several independent lock nodes).
//
// Commands that print also take --json for scripts (fields in docs/cli.md).
//
// Exit status: 0 on success, 1 when a command fails, 2 when the command line is wrong.
// The command is implemented, and tested in-process, by internal/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/jobpipe/jobpipe/internal/cli"
)

func main() {
	// An interrupted migration must still roll back its transaction and release its lock:
	// cancelling the context lets the database calls return instead of the process dying mid-way.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
