// Package states writes the SQL conditions over a kind's pipeline columns that define a job's states.
// They are the one source of those conditions: jobinfo's partial indexes and StateCondition, the
// dispatcher's statements, admin and the tools all take them from here, so a change to a state is made
// once. Each function takes the alias of the kind's table in the statement ("" for none) and names every
// column through it.
package states

import "strings"

// A condition is a conjunction of terms over the pipeline columns, each written with the column first.
type condition []string

var (
	waiting     = condition{"lease_expires_at IS NULL", "processed_at IS NULL", "failed_at IS NULL"}
	neverRan    = condition{"started_at IS NULL", "processed_at IS NULL", "failed_at IS NULL"}
	running     = condition{"lease_expires_at IS NOT NULL"}
	leased      = condition{"lease_expires_at IS NOT NULL", "processed_at IS NULL", "failed_at IS NULL"}
	notRunning  = condition{"lease_expires_at IS NULL"}
	notFinished = condition{"processed_at IS NULL", "failed_at IS NULL"}
	processed   = condition{"processed_at IS NOT NULL"}
	failed      = condition{"failed_at IS NOT NULL"}
)

// sql writes c with its columns named through alias.
func (c condition) sql(alias string) string {
	prefix := ""
	if alias != "" {
		prefix = alias + "."
	}
	return prefix + strings.Join(c, " AND "+prefix)
}

// deparsed writes c, without alias, as PostgreSQL deparses it in an index predicate (pg_get_expr): each
// term in parentheses, and the conjunction too when there is more than one.
func (c condition) deparsed() string {
	s := "(" + strings.Join(c, ") AND (") + ")"
	if len(c) > 1 {
		s = "(" + s + ")"
	}
	return s
}

// Waiting is the condition that a job waits: not claimed and not finished. It is the predicate of the
// ready and scheduled indexes.
func Waiting(alias string) string { return waiting.sql(alias) }

// Running is the condition that a job is claimed: its lease is held. It is the predicate of the
// running-slots index. A running job is not finished; a finished row never holds a lease.
func Running(alias string) string { return running.sql(alias) }

// Leased is Running written with the terms a running job also meets (not finished): the same rows, and
// the predicate of the lease index, which serves the rescue and the counts of running jobs. The two
// predicates differ so that statements that look up a key's running jobs by Running can use only the
// running-slots index. Under one predicate the planner may take the lease index for them, when
// statistics taken while nothing ran price both indexes as empty and the lease index is the shallower;
// it then reads every running row, and every dead entry of one, for each key.
func Leased(alias string) string { return leased.sql(alias) }

// StillRunning is Running for the fenced writes of one attempt (finish, lease extension), which find
// their rows by id. Written so that it matches neither the running-slots nor the lease index's
// predicate: with statistics from before many jobs started (a bulk load analysed while nothing ran),
// the planner would otherwise walk every running row of one for each id instead of looking the ids
// up in the primary key.
func StillRunning(alias string) string { return "(" + Running(alias) + ") IS TRUE" }

// NotRunning is the condition that no lease is held on a job: it waits or has finished.
func NotRunning(alias string) string { return notRunning.sql(alias) }

// NotFinished is the condition that a job has neither been processed nor failed for good.
func NotFinished(alias string) string { return notFinished.sql(alias) }

// NeverRan is the condition that a job has never started and is not finished: the predicate of the
// until-executed unique index.
func NeverRan(alias string) string { return neverRan.sql(alias) }

// Processed is the condition that a job finished successfully.
func Processed(alias string) string { return processed.sql(alias) }

// Failed is the condition that a job failed for good.
func Failed(alias string) string { return failed.sql(alias) }

// WaitingDeparsed, RunningDeparsed and NeverRanDeparsed are the index predicates of Waiting, Running
// and NeverRan as PostgreSQL reports them, to compare an existing index with the one jobinfo creates.
func WaitingDeparsed() string { return waiting.deparsed() }

// RunningDeparsed is Running as PostgreSQL deparses it in an index predicate (see WaitingDeparsed).
func RunningDeparsed() string { return running.deparsed() }

// NeverRanDeparsed is NeverRan as PostgreSQL deparses it in an index predicate (see WaitingDeparsed).
func NeverRanDeparsed() string { return neverRan.deparsed() }
