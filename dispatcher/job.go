package dispatcher

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Job is one job handed to a handler: its data and where it stands.
type Job[T any] struct {
	// ID is the job's row id in its kind's table.
	ID int64
	// Kind is the kind's name.
	Kind string
	// Data is the job's data, read from its row.
	Data T
	// Attempt is this attempt's number: 1 the first time.
	Attempt int
	// MaxAttempts is how many attempts the job gets.
	MaxAttempts int
	// Token is the attempt's fencing token. Kind, ID and Token together name this attempt uniquely;
	// Kind and ID name the job, for idempotency keys of side effects outside PostgreSQL.
	Token int64
	// Key is the job's concurrency key as text ("" for kinds without a key).
	Key string
	// Slot is the running slot of its key the job holds (-1 for kinds without a key).
	Slot int
	// CreatedAt is when the job was enqueued.
	CreatedAt time.Time
	// ProcessAfter is when the job was scheduled to start, if it was.
	ProcessAfter *time.Time

	run *running
}

// Heartbeat extends the job's lease and execution lock now. Heartbeats also run automatically; call it
// to be sure the job still holds its lease before a step that must not run twice. On failure the job's
// context is cancelled with ErrLeaseLost as its cause, and the error is returned.
func (j *Job[T]) Heartbeat(ctx context.Context) error { return j.run.heartbeat(ctx) }

// Handler works one job of kind T. It returns nil when the job is done, or an error to retry it (see
// Snooze, Discard and RunAgain for the other outcomes). ctx is cancelled when the job's lease is lost
// or the dispatcher stops, and its deadline is the kind's timeout (jobinfo.Timeout); context.Cause
// says which (it wraps ErrLeaseLost or ErrTimeout, or is ErrShutdown). A handler must return soon after: past
// Config.HandlerGrace the worker stops waiting for it, records the attempt as a retry, and gives its
// key's slot to the next job, while whatever it returns later changes nothing.
type Handler[T any] func(ctx context.Context, job *Job[T]) error

// TxHandler works one job inside a transaction from Config.DB, which ends with what the handler
// returns:
//   - nil: the job is marked processed in the transaction, and it commits.
//   - Snooze: the job's wait is written in the transaction, and it commits.
//   - RunAgain: the job is marked processed and its next run enqueued in the transaction, and it commits.
//   - Discard: the transaction rolls back; the job fails, with no write of the handler kept.
//   - any other error (or a panic): the transaction rolls back; the job is retried or failed.
//
// So the handler's writes are kept exactly when the attempt ends well. If the job's lease was lost
// before the commit, or its context ended (its timeout passed, or Stop's deadline), the transaction
// rolls back whatever the handler returned.
type TxHandler[T any] func(ctx context.Context, tx pgx.Tx, job *Job[T]) error
