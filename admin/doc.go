// Package admin inspects and changes the jobs of any registered kind without its Go type: what the
// jobpipe command and the dashboard do for an operator.
//
// A kind is found in the registry (jobpipe_kinds, written when a dispatcher registers the kind) and its
// data columns are read from its table, so admin works in a process that has none of the application's
// job types. Every statement names tables and columns only through sanitised identifiers taken from the
// registry and the catalog, never from the caller's input.
//
// Changes keep the dispatcher's invariants: a retried job is a waiting job like any other, so it starts
// in its key's order and within its key's limit; a running job is never changed here, because its
// worker holds the row's fencing token and its writes decide the outcome.
//
// # Reading
//
// A job's state is derived from its pipeline columns by jobinfo.StateCondition: waiting, running,
// processed or failed. Summarize counts a kind's jobs by state in one statement, with the waiting jobs
// that are due (process_after, or created_at when it is NULL, has passed), the total limit in force
// (package limits), the age of the oldest waiting job and how overdue the most overdue due job is.
// Times are the database's (now() in SQL), never the caller's clock. ListJobs pages through a kind's
// jobs newest first, by state and by key (the key as limits.NormalizeKey reads it); GetJob reads one.
// A job's data columns come back as one JSON object in table order.
//
// # Changing
//
// Retry, Discard and RunNow each take job ids and change them in one UPDATE, whose condition says which
// rows qualify; the others are reported as Skipped, with the reason. Each notifies
// uniqueness.NotifyChannel with the kind's name, so dispatchers look for work at once.
//
//   - Retry makes failed and processed jobs wait again, due now. attempts_made is kept: a job that used
//     up its attempts gets exactly one more, because the dispatcher (and its rescuer) fail a job whose
//     attempt number reaches max attempts.
//   - Discard fails waiting jobs (due, scheduled or retrying) with last_error "discarded by an operator"
//     and the reason given. A claim cannot slip in between: PostgreSQL checks the waiting condition
//     again on the row's latest version after waiting for a claim's row lock.
//   - RunNow makes waiting jobs that are not due yet due now.
//
// RetryAllFailed retries every failed job in batches of 1000, each a short transaction, and reports
// its progress.
//
// # Enqueueing from JSON
//
// Enqueue inserts a job from a JSON object of column values, checks each value against its column's
// type first and reports every problem at once (a *DataError), and inserts through package uniqueness,
// so that a duplicate of a job that has not started is skipped, replaced or refused exactly as when the
// application enqueues it.
//
// # Errors
//
// Errors match ErrInvalid (bad input: the command line exits 1, the dashboard answers 400),
// ErrJobNotFound and ErrUnknownKind (404), or ErrTableMissing.
package admin
