// Package dispatcher is jobpipe's entry point: it enqueues jobs and (with the worker side) claims, runs
// and finishes them.
//
// Enqueue, EnqueueTx and EnqueueMany insert jobs of a kind defined with package jobinfo. Until-executed
// uniqueness is exact because the database enforces it (see package uniqueness); OnDuplicate picks what a
// duplicate does. ProcessAfter and ProcessIn schedule a job; it never starts before its time.
package dispatcher
