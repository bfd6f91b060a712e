package dispatcher

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/uniqueness"
)

// EnqueueOption adjusts one enqueue.
type EnqueueOption func(*enqueueOptions)

type enqueueOptions struct {
	row      uniqueness.Row
	strategy uniqueness.Strategy
}

// ProcessAfter makes the job wait until t. A job never starts before its process_after.
func ProcessAfter(t time.Time) EnqueueOption {
	return func(o *enqueueOptions) { o.row.ProcessAfter, o.row.ProcessIn = &t, 0 }
}

// ProcessIn makes the job wait d from now, measured by the database's clock.
func ProcessIn(d time.Duration) EnqueueOption {
	return func(o *enqueueOptions) { o.row.ProcessAfter, o.row.ProcessIn = nil, d }
}

// OnDuplicate picks what happens when a job with the same unique fields is waiting (default
// uniqueness.Skip). Kinds without unique fields never have duplicates.
func OnDuplicate(s uniqueness.Strategy) EnqueueOption {
	return func(o *enqueueOptions) { o.strategy = s }
}

func collect(opts []EnqueueOption) enqueueOptions {
	var o enqueueOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Enqueue inserts job as a job of kind. It returns the new job's id, or, for a duplicate of a waiting job,
// that job's id with Duplicate set (and a *uniqueness.DuplicateError under OnDuplicate(uniqueness.Error)).
//
// Outside a transaction the dispatchers have been notified of the job, after its commit, when Enqueue
// returns. In a transaction (EnqueueTx, or a connection inside BEGIN) the notification is part of it,
// delivered at its commit and dropped at its rollback. Either way db is not used after Enqueue
// returns: the caller may close it, or send its next statement on it, at once. With db a pool,
// enqueues of the kind running at the same time through it share notifications
// (uniqueness.Inserter.InsertCoalesced): many goroutines enqueueing at once commit side by side
// instead of one after the other.
func Enqueue[T any](ctx context.Context, db jobinfo.DB, kind *jobinfo.Kind[T], job T, opts ...EnqueueOption) (uniqueness.Result, error) {
	o := collect(opts)
	o.row.Values = kind.Values(&job)
	in := uniqueness.For(kind.Info())
	if pool, ok := db.(*pgxpool.Pool); ok {
		return in.InsertCoalesced(ctx, pool, o.row, o.strategy)
	}
	return in.Insert(ctx, db, o.row, o.strategy)
}

// EnqueueTx is Enqueue inside the caller's transaction: the job exists only if tx commits, together with
// the caller's own writes, and the dispatchers are notified of it when tx commits.
func EnqueueTx[T any](ctx context.Context, tx pgx.Tx, kind *jobinfo.Kind[T], job T, opts ...EnqueueOption) (uniqueness.Result, error) {
	return Enqueue(ctx, tx, kind, job, opts...)
}

// EnqueueMany inserts jobs in one round trip and returns each job's result in input order; the options
// apply to every job. Either all jobs are enqueued (or resolved as duplicates) or none is. Under
// OnDuplicate(uniqueness.Error) a refused duplicate is reported in its Result.Err, not as the call's
// error.
func EnqueueMany[T any](ctx context.Context, db jobinfo.DB, kind *jobinfo.Kind[T], jobs []T, opts ...EnqueueOption) ([]uniqueness.Result, error) {
	o := collect(opts)
	rows := make([]uniqueness.Row, len(jobs))
	for i := range jobs {
		rows[i] = o.row
		rows[i].Values = kind.Values(&jobs[i])
	}
	return uniqueness.For(kind.Info()).InsertMany(ctx, db, rows, o.strategy)
}
