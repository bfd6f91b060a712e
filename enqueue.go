package jobpipe

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/uniqueness"
)

// DB is jobinfo.DB: a database handle; *pgxpool.Pool, *pgx.Conn and pgx.Tx satisfy it.
type DB = jobinfo.DB

// Result is uniqueness.Result: the enqueued job's id, or the waiting job's it duplicated.
type Result = uniqueness.Result

// EnqueueOption is dispatcher.EnqueueOption: it adjusts one enqueue.
type EnqueueOption = dispatcher.EnqueueOption

// Enqueue is dispatcher.Enqueue: it inserts job as a job of kind and wakes the dispatchers.
func Enqueue[T any](ctx context.Context, db DB, kind *Kind[T], job T, opts ...EnqueueOption) (Result, error) {
	return dispatcher.Enqueue(ctx, db, kind, job, opts...)
}

// EnqueueTx is dispatcher.EnqueueTx: Enqueue inside the caller's transaction, so that the job exists
// only if tx commits.
func EnqueueTx[T any](ctx context.Context, tx pgx.Tx, kind *Kind[T], job T, opts ...EnqueueOption) (Result, error) {
	return dispatcher.EnqueueTx(ctx, tx, kind, job, opts...)
}

// EnqueueMany is dispatcher.EnqueueMany: it inserts jobs in one round trip, all or none, and returns
// each job's result in input order.
func EnqueueMany[T any](ctx context.Context, db DB, kind *Kind[T], jobs []T, opts ...EnqueueOption) ([]Result, error) {
	return dispatcher.EnqueueMany(ctx, db, kind, jobs, opts...)
}

// ProcessIn is dispatcher.ProcessIn: the job waits d from now, by the database's clock.
func ProcessIn(d time.Duration) EnqueueOption { return dispatcher.ProcessIn(d) }

// ProcessAfter is dispatcher.ProcessAfter: the job waits until t.
func ProcessAfter(t time.Time) EnqueueOption { return dispatcher.ProcessAfter(t) }

// OnDuplicate is dispatcher.OnDuplicate: what enqueueing a job does when a job with the same unique
// fields is waiting (default Skip).
func OnDuplicate(s DuplicateStrategy) EnqueueOption { return dispatcher.OnDuplicate(s) }

// DuplicateStrategy is uniqueness.Strategy: what enqueueing a duplicate of a waiting job does.
type DuplicateStrategy = uniqueness.Strategy

const (
	// Skip is uniqueness.Skip: the waiting job stays as it is; Result has its id and Duplicate set.
	// The default.
	Skip DuplicateStrategy = uniqueness.Skip
	// Replace is uniqueness.Replace: the waiting job's data and process_after become the new job's.
	Replace DuplicateStrategy = uniqueness.Replace
	// ReplaceData is uniqueness.ReplaceData: the waiting job's data become the new job's; its
	// process_after stays.
	ReplaceData DuplicateStrategy = uniqueness.ReplaceData
	// ReplaceSchedule is uniqueness.ReplaceSchedule: the waiting job's process_after becomes the new
	// job's; its data stay (a debounce).
	ReplaceSchedule DuplicateStrategy = uniqueness.ReplaceSchedule
	// Error is uniqueness.Error: the waiting job stays as it is, and the enqueue returns a
	// *DuplicateError naming it.
	Error DuplicateStrategy = uniqueness.Error
)

// ErrDuplicate is uniqueness.ErrDuplicate: errors.Is matches it with every *DuplicateError.
var ErrDuplicate = uniqueness.ErrDuplicate

// DuplicateError is uniqueness.DuplicateError: under OnDuplicate(Error), a job with the same unique
// fields was waiting (ExistingID).
type DuplicateError = uniqueness.DuplicateError
