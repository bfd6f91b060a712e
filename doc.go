// Package jobpipe is the everyday API of jobpipe in one import: background jobs kept in PostgreSQL,
// one table per job kind, run by dispatchers that take Redis locks for per-key limits.
//
// Define a kind from a struct (Define, MustDefine and the KindOption functions), enqueue its jobs
// (Enqueue, EnqueueTx, EnqueueMany with ProcessIn, ProcessAfter and OnDuplicate), and work them with
// a Dispatcher (New, Register or RegisterTx, then Start and Stop). A handler returns nil when its job
// is done, an error to retry it with backoff, or Snooze, Discard or RunAgain for the other outcomes.
// Migrate applies jobpipe's own tables; a kind's table comes from `jobpipe kind new` or
// Kind.TableSpec.
//
// Every identifier here is another package's, under the same or a plainer name, so values pass freely
// between the two: jobinfo (kinds), uniqueness (duplicates), dispatcher (enqueue and the
// dispatcher), execlock (the Redis nodes) and migrations. Those packages hold the rest: observers
// and statistics (dispatcher), recurring jobs (dispatcher.AddSchedule and package schedule),
// retry policies (backoff), limits changed at runtime (limits), and inspection without the Go types
// (admin).
package jobpipe
