package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/limits"
)

const kindsUsage = `usage: jobpipe kinds [--json] [--database-url URL]

Lists every registered kind with its jobs counted by state: waiting (of which due now), running
against the kind's total limit, processed and failed; how long the oldest waiting job has waited
since it was enqueued; and the schedule lag: how far past its due time the most overdue due job is.
A lag that keeps growing means the kind's workers do not keep up, or the kind is paused or limited.
Below the table, a line for each dispatcher in which a keyed kind waits for a quorum of Redis lock
nodes: since when, and the nodes that do not answer with their errors.
Without --database-url and $DATABASE_URL, the first line names the database used.

flags:
  --json              print JSON instead of text (fields in docs/cli.md)
  --database-url URL  the database (default $DATABASE_URL, else ` + defaultDatabaseURL + `)
`

// noKindsText is what "jobpipe kinds" says when no kind is registered.
const noKindsText = "no kinds are registered: a dispatcher registers its kinds when it starts, and a migration written by " +
	"\"jobpipe kind new\" registers its kind when applied (\"jobpipe migrate up --dir DIR\" applies your application's migrations in DIR)"

func init() {
	register(&command{name: "kinds", summary: "list job kinds with their jobs counted by state", usage: kindsUsage, run: runKinds})
}

// kindJSONRow is one kind in "jobpipe kinds --json"; durations are in seconds.
type kindJSONRow struct {
	Kind                 string  `json:"kind"`
	Waiting              int64   `json:"waiting"`
	Due                  int64   `json:"due"`
	Running              int64   `json:"running"`
	MaxRunning           *int    `json:"max_running"` // null: no total limit
	Paused               bool    `json:"paused"`
	Processed            int64   `json:"processed"`
	Failed               int64   `json:"failed"`
	OldestWaitingSeconds float64 `json:"oldest_waiting_seconds"`
	ScheduleLagSeconds   float64 `json:"schedule_lag_seconds"`
	// LockWaits are the dispatchers in which the kind waits for a quorum of Redis lock nodes.
	LockWaits []lockWaitJSON `json:"lock_waits"`
}

// lockWaitJSON is one admin.LockWait in "jobpipe kinds --json".
type lockWaitJSON struct {
	Dispatcher string    `json:"dispatcher"`
	Since      time.Time `json:"since"`
	Error      string    `json:"error"`
}

func runKinds(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("kinds", flag.ContinueOnError)
	dbURL := databaseURLFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: kinds takes none", pos[0])
	}
	pool, err := e.connect(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if e.used.from == fromDefault {
		// The fallback is easy to use without noticing: say which database the counts come from.
		out := e.Stdout
		if *asJSON {
			out = e.Stderr
		}
		fmt.Fprintf(out, "using %s (%s)\n", e.used, e.used.origin())
	}
	// A kind whose table is missing is reported after the others are shown.
	sums, missing := admin.SummarizeAll(ctx, pool)
	if missing != nil && !errors.Is(missing, admin.ErrTableMissing) {
		return missing
	}
	if err := writeKinds(e, sums, *asJSON); err != nil {
		return err
	}
	return missing
}

func writeKinds(e *env, sums []admin.Summary, asJSON bool) error {
	if asJSON {
		rows := make([]kindJSONRow, len(sums))
		for i, s := range sums {
			rows[i] = kindJSONRow{Kind: s.Kind, Waiting: s.Waiting, Due: s.Due, Running: s.Running, Paused: s.Paused,
				Processed: s.Processed, Failed: s.Failed, OldestWaitingSeconds: roundSeconds(s.OldestWaiting),
				ScheduleLagSeconds: roundSeconds(s.ScheduleLag), LockWaits: []lockWaitJSON{}}
			if s.MaxRunning != limits.Unlimited {
				rows[i].MaxRunning = &s.MaxRunning
			}
			for _, w := range s.LockWaits {
				rows[i].LockWaits = append(rows[i].LockWaits, lockWaitJSON{Dispatcher: w.Dispatcher, Since: w.Since.UTC(), Error: w.Error})
			}
		}
		return writeJSON(e, rows)
	}
	if len(sums) == 0 {
		fmt.Fprintln(e.Stdout, noKindsText)
		return nil
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tWAITING\tDUE\tRUNNING\tPROCESSED\tFAILED\tOLDEST WAITING\tSCHEDULE LAG")
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%s\t%s\n", s.Kind, s.Waiting, s.Due, runningText(s), s.Processed, s.Failed,
			ageText(s.OldestWaiting), ageText(s.ScheduleLag))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Below the table: an error text would stretch a column of it.
	first := true
	for _, s := range sums {
		for _, w := range s.LockWaits {
			if first {
				fmt.Fprintln(e.Stdout)
				first = false
			}
			fmt.Fprintf(e.Stdout, "%s: %s\n", s.Kind, w)
		}
	}
	return nil
}

// runningText is "3/10", "3" with no total limit, or "3 (paused)".
func runningText(s admin.Summary) string {
	n := strconv.FormatInt(s.Running, 10)
	switch {
	case s.Paused:
		return n + " (paused)"
	case s.MaxRunning == limits.Unlimited:
		return n
	}
	return n + "/" + strconv.Itoa(s.MaxRunning)
}

// ageText shows a duration to the second, "-" for none.
func ageText(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Second).String()
}

// roundSeconds gives d in seconds to the millisecond.
func roundSeconds(d time.Duration) float64 {
	return math.Round(d.Seconds()*1000) / 1000
}
