// Package uniqueness owns until-executed uniqueness: what happens when a job is enqueued while another job
// of its kind with the same unique fields has not started yet.
//
// The database decides, never a SELECT before an INSERT: each kind with unique fields has a partial unique
// index over them, NULLS NOT DISTINCT, covering the rows that were never started (see package jobinfo).
// Every insert names that index in ON CONFLICT, so two concurrent enqueues of one key can never both
// leave a waiting row, and a job that is running, processed or failed does not block a new one.
//
// On a duplicate the caller picks a Strategy: Skip (the default) returns the existing job's id with
// Duplicate set; Replace, ReplaceData and ReplaceSchedule update the waiting job (debounce); Error returns
// a *DuplicateError naming the existing id.
//
// An Inserter holds a kind's statements, built once: For keeps one on each kind made by jobinfo.Define
// (jobinfo.Info.Derived), and the package keeps no state of its own. Every insert wakes the dispatchers
// of its kind (NotifyChannel) by the time it returns, at its commit or, for concurrent inserts through
// one pool, with a notification they share (Inserter.InsertCoalesced); the database handle it is given
// is not used after it returns.
package uniqueness
