// Package dispatcher is jobpipe's entry point: it enqueues jobs, and claims, runs and finishes them.
//
// Enqueue, EnqueueTx and EnqueueMany insert jobs of a kind defined with package jobinfo.
// Until-executed uniqueness is exact because the database enforces it (see package uniqueness);
// OnDuplicate picks what a duplicate does. ProcessAfter and ProcessIn schedule a job; it never starts
// before its time.
//
// A Dispatcher works the kinds registered on it (Register, or RegisterTx for handlers whose writes
// commit with the job's completion). Any number of dispatchers, in any number of processes, may work
// the same kinds:
//
//   - Jobs are claimed in batches with FOR UPDATE SKIP LOCKED, so no job is claimed twice and no
//     claim is wasted. Each claim counts the attempt and bumps the row's fencing token; every later
//     write of that attempt checks the token, so a worker that lost its lease changes nothing.
//   - For kinds with a concurrency key, only the first waiting job of each key is chosen, and only
//     while the key runs fewer jobs than its limit. A redsync queue lock and then an execution lock
//     (package execlock) guard each running slot, and a unique index over running slots lets the
//     database refuse a claim that a Redis node wrongly allowed.
//   - Heartbeats renew the lease and the lock; when one fails, the handler's context is cancelled with
//     ErrLeaseLost as its cause, and the attempt is not recorded as done.
//   - Outcomes (processed, retried with the kind's backoff, failed, or what Snooze, Discard and
//     RunAgain ask for) are written in batches. A leader per kind takes back jobs whose lease expired.
//   - LISTEN/NOTIFY, a timer for the next scheduled job and a slow poll wake the dispatchers.
//
// docs/dispatcher.md in the repository describes each step and the test that proves it.
package dispatcher
