package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/prune"
)

var pruneUsage = `usage: jobpipe prune [KIND] [--older-than D] [--state processed|failed|all] [--batch N]
                     [--progress auto|always|never] [--json] [--database-url URL]

Deletes finished jobs of a kind, or of every registered kind, in small batches: each statement looks
at N rows (default ` + fmt.Sprint(prune.DefaultBatchSize) + `) and is its own short transaction, so no
lock is held long and dispatchers go on meanwhile. Waiting and running jobs are never deleted.
The elected dispatcher prunes by each kind's retention on its own (jobinfo.Retention); this command is
for a one-off clean-up.

flags:
  --older-than D      delete jobs that finished more than D ago (90m, 48h); default: processed jobs
                      after ` + jobinfo.DefaultRetainProcessed.String() + `, failed jobs after ` + jobinfo.DefaultRetainFailed.String() + `
  --state S           processed, failed or all (default all)
  --batch N           rows looked at per statement (1 to 100000)
  --progress MODE     draw a progress bar on stderr: auto (when it is a terminal), always or never
  --json              print JSON instead of text (fields in docs/cli.md)
  --database-url URL  the database (default $DATABASE_URL, else ` + defaultDatabaseURL + `)
`

func init() {
	register(&command{name: "prune", summary: "delete finished jobs older than a retention, in small batches", usage: pruneUsage, run: runPrune})
}

// pruneJSON is one kind's line in "jobpipe prune --json".
type pruneJSON struct {
	Kind      string `json:"kind"`
	Processed int64  `json:"processed"`
	Failed    int64  `json:"failed"`
}

func runPrune(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("prune", flag.ContinueOnError)
	dbURL := databaseURLFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	olderThan := fs.String("older-than", "", "delete jobs finished more than this long ago")
	state := fs.String("state", "all", "processed, failed or all")
	batch := decimalFlag{n: prune.DefaultBatchSize, text: strconv.Itoa(prune.DefaultBatchSize)}
	fs.Var(&batch, "batch", "rows per statement")
	progress := progressFlag(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("unexpected argument %q; give at most one KIND", pos[1])
	}
	opts := prune.Options{Processed: jobinfo.DefaultRetainProcessed, Failed: jobinfo.DefaultRetainFailed, BatchSize: int(batch.n)}
	if *olderThan != "" {
		d, err := time.ParseDuration(*olderThan)
		if err != nil || d <= 0 {
			return usagef("--older-than %q is not a positive duration: write it as 90m, 48h or 720h", *olderThan)
		}
		opts.Processed, opts.Failed = d, d
	}
	switch *state {
	case "processed":
		opts.Failed = 0
	case "failed":
		opts.Processed = 0
	case "all":
	default:
		return usagef("--state %q: want processed, failed or all", *state)
	}
	if batch.n < 1 || batch.n > 100000 {
		return usagef("--batch %s: give 1 to 100000", batch.text)
	}
	draw, err := e.progressMode(*progress)
	if err != nil {
		return usagef("%v", err)
	}
	pool, err := e.connect(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	var kinds []*admin.Kind
	if len(pos) == 1 {
		k, err := admin.LoadKind(ctx, pool, pos[0])
		if err != nil {
			return unknownKind(ctx, pool, "prune", pos[0], err)
		}
		kinds = []*admin.Kind{k}
	} else if kinds, err = admin.Kinds(ctx, pool); err != nil {
		return err
	}
	results := make([]pruneJSON, 0, len(kinds))
	for _, k := range kinds {
		bar := newProgressBar(e, draw, "pruning "+k.Name())
		o := opts
		var maxID int64
		o.Progress = func(p prune.Progress) { maxID = p.MaxID; bar.update(min(p.ID, p.MaxID), p.MaxID) }
		res, err := prune.Run(ctx, pool, k.Info, o)
		if err == nil {
			// The run ends at the first batch that finds nothing old enough, usually before the last id.
			bar.update(maxID, maxID)
		}
		bar.done()
		if err != nil {
			return err
		}
		results = append(results, pruneJSON{Kind: k.Name(), Processed: res.Processed, Failed: res.Failed})
		if !*asJSON {
			fmt.Fprintf(e.Stdout, "%s: deleted %d processed and %d failed %s\n", k.Name(), res.Processed, res.Failed,
				plural(int(res.Processed+res.Failed), "job"))
		}
	}
	if *asJSON {
		return writeJSON(e, results)
	}
	return nil
}
