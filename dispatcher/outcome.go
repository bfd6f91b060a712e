package dispatcher

import (
	"errors"
	"fmt"
	"time"
)

// A handler steers its job by what it returns: nil marks the job processed; any other error retries it
// with the kind's backoff until max attempts, then fails it. These errors ask for something else.

// SnoozeError asks for the job to wait Delay and run again without counting the attempt. Make it with
// Snooze.
type SnoozeError struct{ Delay time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("dispatcher: snooze for %v", e.Delay) }

// Snooze puts the job back to wait d before it runs again; the attempt is not counted, so a job may
// snooze any number of times. A TxHandler's writes commit with the snooze.
func Snooze(d time.Duration) error { return &SnoozeError{Delay: max(d, 0)} }

// DiscardError asks for the job to fail now, without retries. Make it with Discard.
type DiscardError struct{ Err error }

func (e *DiscardError) Error() string { return "dispatcher: discarded: " + errString(e.Err) }
func (e *DiscardError) Unwrap() error { return e.Err }

// Discard fails the job now with err as its last error, however many attempts are left: for errors
// that retrying cannot fix. A TxHandler's writes are rolled back.
func Discard(err error) error { return &DiscardError{Err: err} }

// RunAgainError asks for the job to be marked processed and a new job with the same data to be
// enqueued Delay from now. Make it with RunAgain.
type RunAgainError struct{ Delay time.Duration }

func (e *RunAgainError) Error() string { return fmt.Sprintf("dispatcher: run again in %v", e.Delay) }

// RunAgain marks the job processed and enqueues its next run, with the same data, d from now, in one
// transaction (a TxHandler's own, which then commits with the handler's writes): a job that works through a backlog a slice at a time re-enqueues itself while work
// is left. For kinds with unique fields, the next run is skipped when a job of the same key is already
// waiting (it will do the work).
func RunAgain(d time.Duration) error { return &RunAgainError{Delay: max(d, 0)} }

func errString(err error) string {
	if err == nil {
		return "no error given"
	}
	return err.Error()
}

// Causes a job's context is cancelled with; read them with context.Cause.
var (
	// ErrLeaseLost: a heartbeat could not extend the job's lease or its execution lock, or the lease ran
	// out before one could. Another dispatcher may run the job; this attempt is not recorded as done.
	ErrLeaseLost = errors.New("dispatcher: the job's lease was lost")
	// ErrShutdown: the dispatcher is stopping and the job ran past Stop's deadline. The job is put back
	// to wait and runs again.
	ErrShutdown = errors.New("dispatcher: stopping: the job was interrupted")
	// ErrTimeout: the job ran past its kind's timeout (jobinfo.Timeout). The cause wraps it and names
	// the timeout ("dispatcher: the job ran past its timeout of 1m0s"). An error the handler returns
	// after it is retried as a timeout; nil still marks the job processed, except from a TxHandler,
	// whose transaction can no longer commit.
	ErrTimeout = errors.New("dispatcher: the job ran past its timeout")
)

// rowWrite is what a finish writes to a job's row, in the finish statement's own codes (see
// queries.go). It is not an outcome: an attempt's Outcome follows from its rowWrite, whether the row
// accepted it, and why the attempt ended (see observed), and Stats and the Observer count that.
type rowWrite int16

const (
	writeProcessed rowWrite = 0 // done
	writeRetry     rowWrite = 1 // failed this attempt; waits delay, attempts left
	writeFailed    rowWrite = 2 // failed for good
	writeSnooze    rowWrite = 3 // waits delay; attempt not counted
	writeRunAgain  rowWrite = 4 // done, and the next run enqueued delay from now
	writeRelease   rowWrite = 5 // never ran (lock refused, shutdown before start): back to waiting, not counted
)

func (o rowWrite) String() string {
	return [...]string{"processed", "retry", "failed", "snooze", "run-again", "release"}[o]
}
