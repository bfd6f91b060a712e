package prune

import (
	"context"
	"fmt"
	"time"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// DefaultBatchSize is how many rows one statement looks at (and deletes at most) when Options gives
// no BatchSize: a statement takes milliseconds and locks no more than that many rows.
const DefaultBatchSize = 1000

// Options says what to delete.
type Options struct {
	// Processed deletes processed jobs that finished more than this long ago, by the database's
	// clock; 0 or negative keeps them.
	Processed time.Duration
	// Failed deletes failed jobs that failed more than this long ago; 0 or negative keeps them.
	Failed time.Duration
	// BatchSize is how many rows one statement looks at. Default DefaultBatchSize.
	BatchSize int
	// Progress, if set, is called after each batch with the totals so far.
	Progress func(Progress)
}

// Retention returns the Options of a kind's own retention (jobinfo.Retention).
func Retention(info *jobinfo.Info) Options {
	return Options{Processed: info.RetainProcessed, Failed: info.RetainFailed}
}

// Progress is how far a run has got.
type Progress struct {
	// Processed and Failed count the rows deleted so far.
	Processed, Failed int64
	// Batches counts the statements run so far.
	Batches int
	// ID is the highest id looked at so far; MaxID the highest id in the table when the run began.
	// The run may end before ID reaches MaxID (see the package's doc).
	ID, MaxID int64
}

// Result is what a run deleted.
type Result struct {
	// Processed and Failed count the rows deleted.
	Processed, Failed int64
	// Batches counts the statements run.
	Batches int
}

// Run deletes the kind's finished jobs older than the retention in o, batch by batch, and returns
// how many it deleted. ctx is checked between batches (and cancels the statement running); on an
// error the Result counts what the batches before it deleted, which stays deleted. With db a pool,
// each batch is its own transaction; in a pgx.Tx, all are part of it.
func Run(ctx context.Context, db jobinfo.DB, info *jobinfo.Info, o Options) (Result, error) {
	var res Result
	processed, failed := keep(o.Processed), keep(o.Failed)
	if processed == nil && failed == nil {
		return res, nil
	}
	batch := o.BatchSize
	if batch < 1 {
		batch = DefaultBatchSize
	}
	var maxID int64
	if o.Progress != nil {
		if err := db.QueryRow(ctx, maxIDSQL(info)).Scan(&maxID); err != nil {
			return res, fmt.Errorf("prune: kind %q: %w", info.Name, err)
		}
	}
	q := batchSQL(info)
	var after int64
	for {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("prune: kind %q: stopped after deleting %d processed and %d failed jobs: %w", info.Name, res.Processed, res.Failed, err)
		}
		var hi *int64
		var old bool
		var p, f int64
		if err := db.QueryRow(ctx, q, after, batch, processed, failed).Scan(&hi, &old, &p, &f); err != nil {
			return res, fmt.Errorf("prune: kind %q: batch after id %d: %w", info.Name, after, err)
		}
		res.Processed, res.Failed, res.Batches = res.Processed+p, res.Failed+f, res.Batches+1
		if hi != nil {
			after = *hi
		}
		if o.Progress != nil {
			o.Progress(Progress{Processed: res.Processed, Failed: res.Failed, Batches: res.Batches, ID: after, MaxID: maxID})
		}
		if hi == nil || !old {
			return res, nil
		}
	}
}

// keep returns a retention in seconds as the statement takes it: NULL to keep the rows.
func keep(d time.Duration) *float64 {
	if d <= 0 {
		return nil
	}
	s := d.Seconds()
	return &s
}
