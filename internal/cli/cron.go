package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jobpipe/jobpipe/schedule"
)

const cronUsage = `usage: jobpipe cron list [--json] [--database-url URL]

Lists the recurring jobs: every schedule the dispatchers have stored, with its kind, cron expression,
time zone, catch-up policy, next run, last run and the job the last run enqueued. Schedules are
defined in the application (dispatcher.AddSchedule) and stored when a dispatcher starts; the elected
dispatcher fires them. See docs/recurring.md.

flags:
  --json              print JSON instead of text (fields in docs/cli.md)
  --database-url URL  the database (default $DATABASE_URL, else ` + defaultDatabaseURL + `)
`

func init() {
	register(&command{name: "cron", summary: "list the recurring jobs and their next runs", usage: cronUsage, run: runCron})
}

// cronJSON is one schedule in "jobpipe cron list --json".
type cronJSON struct {
	Name      string          `json:"name"`
	Kind      string          `json:"kind"`
	Cron      string          `json:"cron"`
	TimeZone  string          `json:"time_zone"`
	CatchUp   string          `json:"catch_up"`
	Data      json.RawMessage `json:"data"`
	NextRunAt time.Time       `json:"next_run_at"`
	LastRunAt *time.Time      `json:"last_run_at"`
	LastJobID *int64          `json:"last_job_id"`
}

func runCron(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef("missing subcommand; want list")
	}
	if isHelpFlag(args[0]) {
		return flag.ErrHelp
	}
	if args[0] != "list" {
		return usagef("unknown subcommand %q; want list", args[0])
	}
	fs := flag.NewFlagSet("cron list", flag.ContinueOnError)
	dbURL := databaseURLFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return &usageError{where: "cron list", err: fmt.Errorf("unexpected argument %q: cron list takes none", pos[0])}
	}
	pool, err := e.connect(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	all, err := schedule.List(ctx, pool)
	if err != nil {
		return err
	}
	if *asJSON {
		out := make([]cronJSON, len(all))
		for i, s := range all {
			data := s.Data
			if data == nil {
				data = json.RawMessage("null")
			}
			out[i] = cronJSON{Name: s.Name, Kind: s.Kind, Cron: s.Cron, TimeZone: s.TimeZone, CatchUp: string(s.CatchUp),
				Data: data, NextRunAt: s.NextRunAt, LastRunAt: s.LastRunAt, LastJobID: s.LastJobID}
		}
		return writeJSON(e, out)
	}
	if len(all) == 0 {
		fmt.Fprintln(e.Stdout, "no schedules: a dispatcher stores its schedules (dispatcher.AddSchedule) when it starts")
		return nil
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tCRON\tZONE\tCATCH-UP\tNEXT RUN\tLAST RUN\tLAST JOB")
	for _, s := range all {
		lastJob := "-"
		if s.LastJobID != nil {
			lastJob = strconv.FormatInt(*s.LastJobID, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Kind, s.Cron, s.TimeZone, s.CatchUp,
			timeText(s.NextRunAt), timeOrDash(s.LastRunAt, "-"), lastJob)
	}
	return tw.Flush()
}
