package kindsql

import (
	"fmt"
	"strings"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// Admin holds the statements operators' tools (package admin) run over a kind's table.
type Admin struct {
	// Jobs selects what admin reads of a job from the rows aliased t: id, state, data as JSON, key
	// text, then the pipeline columns. The caller adds WHERE and ORDER BY.
	Jobs string
	// Summary counts the rows of each state in one pass (waiting, due, running, processed, failed),
	// and the age of the oldest waiting job and the lag of the most overdue one, in microseconds.
	Summary string
	// Retry, Discard and RunNow change the jobs $1 and read back, from the statement's snapshot, the
	// state of those that did not change (see adminActionSQL); $2 and $3 are the channel and payload
	// to notify when a row changed, and Discard's $4 is the error to record.
	Retry, Discard, RunNow string
	// CountFailed counts the failed jobs and reads the highest failed id; NextFailed lists the next
	// failed ids after $1 up to $2, at most batch of them.
	CountFailed, NextFailed string
}

// adminKind is the data of admin's templates.
type adminKind struct {
	*kind
	// Action is the action rendered: "retry", "discard" or "run now".
	Action string
	// Batch is how many ids NextFailed lists.
	Batch int
	cols  []string
}

// ForAdmin renders admin's statements for info; columns are the data columns as the table has them
// (the catalog's order, which admin reads), and batch how many failed ids NextFailed lists.
func ForAdmin(info *jobinfo.Info, columns []string, batch int) Admin {
	k := adminKind{kind: newKind(info), Batch: batch, cols: sanitized(columns)}
	action := func(name string) string {
		a := k
		a.Action = name
		return render("adminAction", a)
	}
	return Admin{
		Jobs: render("adminJobs", k), Summary: render("adminSummary", k),
		Retry: action("retry"), Discard: action("discard"), RunNow: action("run now"),
		CountFailed: render("adminCountFailed", k), NextFailed: render("adminNextFailed", k),
	}
}

// DataJSON is an expression giving the data columns of the row aliased a as one JSON object, in table
// order. row_to_json over a sub-select keeps that order and, unlike json_build_object, has no limit of
// 100 arguments; d.* rather than d, because a column may be named d.
func (k adminKind) DataJSON(a string) string {
	if len(k.cols) == 0 {
		return "'{}'::json"
	}
	return "(SELECT row_to_json(d.*) FROM (SELECT " + list(a, k.cols) + ") d)"
}

// AnyKeyText is the key text of the row aliased a, empty for a kind without key.
func (k adminKind) AnyKeyText(a string) string {
	if !k.Keyed {
		return "''"
	}
	return k.KeyText(a)
}

// state is the condition, in parentheses, that the row aliased alias is in state s.
func state(s, alias string) string { return "(" + jobinfo.State(s).Condition(alias) + ")" }

// stateCase is an expression giving the state of the row aliased alias, by jobinfo's states.
func stateCase(alias string) string {
	var b strings.Builder
	b.WriteString("CASE")
	for _, s := range jobinfo.States {
		fmt.Fprintf(&b, " WHEN %s THEN '%s'", state(string(s), alias), s)
	}
	b.WriteString(" END")
	return b.String()
}

// dueAt is the condition that the waiting row aliased alias is due, whatever the kind's order:
// process_after NULL means now, and a row's created_at is never later than now.
func dueAt(alias string) string {
	return fmt.Sprintf("COALESCE(%[1]s.process_after, %[1]s.created_at) <= now()", alias)
}

const adminJobsSQL = `SELECT t.id, {{stateCase "t"}}, {{.DataJSON "t"}}, {{.AnyKeyText "t"}}, t.attempts_made, t.created_at, t.updated_at, t.process_after,
	t.started_at, t.lease_expires_at, t.processed_at, t.failed_at, t.lease_owner, t.last_error, t.lock_token, t.lock_slot
FROM {{.Table}} t`

const adminSummarySQL = `SELECT count(*) FILTER (WHERE {{state "waiting" "t"}}), count(*) FILTER (WHERE {{template "adminDue"}}),
	count(*) FILTER (WHERE {{state "running" "t"}}), count(*) FILTER (WHERE {{state "processed" "t"}}), count(*) FILTER (WHERE {{state "failed" "t"}}),
	coalesce(greatest((extract(epoch FROM now() - min(t.created_at) FILTER (WHERE {{state "waiting" "t"}})) * 1000000)::bigint, 0), 0), coalesce(greatest((extract(epoch FROM now() - min(COALESCE(t.process_after, t.created_at)) FILTER (WHERE {{template "adminDue"}})) * 1000000)::bigint, 0), 0)
FROM {{.Table}} t`

// adminActionSQL changes the rows of the requested ids ($1) that are in the action's states and reads
// back, for every id, whether it changed, its state, whether it was due, and the job that kept it from
// changing (retry of a unique kind). A failed job that never started would count again for
// until-executed uniqueness once retried, so a retry leaves it when a job of its unique fields has not
// started either, or is retried with it and comes first. It notifies $2 with $3 when it changed a row.
const adminActionSQL = `WITH req AS (SELECT DISTINCT unnest($1::bigint[]) AS id),
changed AS (
	UPDATE {{.Table}} t SET {{template "adminActionSet" .}}, updated_at = now()
	FROM req WHERE t.id = req.id AND {{template "adminActionCond" .}}
	RETURNING t.id)
SELECT req.id, c.id IS NOT NULL, CASE WHEN t.id IS NOT NULL THEN {{stateCase "t"}} END, coalesce({{dueAt "t"}}, false), {{template "adminActionDup" .}},
	(SELECT pg_notify($2, $3) FROM changed LIMIT 1) IS NULL
FROM req LEFT JOIN changed c ON c.id = req.id LEFT JOIN {{.Table}} t ON t.id = req.id
ORDER BY req.id`

const adminActionSetSQL = `
{{- if eq .Action "retry"}}failed_at = NULL, processed_at = NULL, lock_slot = NULL, process_after = now()
{{- else if eq .Action "discard"}}failed_at = now(), last_error = $4
{{- else if eq .Action "run now"}}process_after = now()
{{- end}}`

const adminActionCondSQL = `
{{- if eq .Action "retry"}}({{state "failed" "t"}} OR {{state "processed" "t"}})
	{{- if .Unique}}
	AND NOT (t.started_at IS NULL AND EXISTS (SELECT 1 {{template "adminDuplicates" .}}))
	{{- end}}
{{- else if eq .Action "discard"}}{{state "waiting" "t"}}
{{- else if eq .Action "run now"}}{{state "waiting" "t"}} AND NOT {{dueAt "t"}}
{{- end}}`

const adminActionDupSQL = `
{{- if and (eq .Action "retry") .Unique -}}
CASE WHEN t.started_at IS NULL THEN (SELECT min(d.id) {{template "adminDuplicates" .}}) END
{{- else}}NULL::bigint{{end}}`

// adminDuplicatesSQL are the duplicates of a never-started row t: never-started rows of its unique
// fields, and the failed never-started rows retried with it that come first.
const adminDuplicatesSQL = `FROM {{.Table}} d WHERE {{.SameUnique "d" "t"}} AND d.id <> t.id AND ({{neverRan "d" | printf "(%s)"}}
		OR (d.started_at IS NULL AND {{state "failed" "d"}} AND d.id < t.id AND d.id IN (SELECT id FROM req)))`

var _ = parse(statements, map[string]string{
	"adminJobs": adminJobsSQL, "adminSummary": adminSummarySQL,
	"adminDue":    `{{state "waiting" "t"}} AND {{dueAt "t"}}`,
	"adminAction": adminActionSQL, "adminActionSet": adminActionSetSQL, "adminActionCond": adminActionCondSQL,
	"adminActionDup": adminActionDupSQL, "adminDuplicates": adminDuplicatesSQL,
	"adminCountFailed": `SELECT count(*), coalesce(max(t.id), 0) FROM {{.Table}} t WHERE {{state "failed" "t"}}`,
	"adminNextFailed":  `SELECT t.id FROM {{.Table}} t WHERE {{state "failed" "t"}} AND t.id > $1 AND t.id <= $2 ORDER BY t.id LIMIT {{.Batch}}`,
})
