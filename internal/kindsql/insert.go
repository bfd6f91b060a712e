package kindsql

import (
	"fmt"
	"strings"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// Duplicate is what an insert does to the waiting job whose unique fields it repeats (see
// uniqueness.Strategy, which chooses it).
type Duplicate string

// The changes an insert makes to a waiting duplicate.
const (
	// KeepDuplicate leaves it as it is.
	KeepDuplicate Duplicate = "keep"
	// ReplaceDuplicate overwrites its data columns and process_after.
	ReplaceDuplicate Duplicate = "replace"
	// ReplaceDuplicateData overwrites its data columns.
	ReplaceDuplicateData Duplicate = "replace-data"
	// ReplaceDuplicateSchedule overwrites its process_after.
	ReplaceDuplicateSchedule Duplicate = "replace-schedule"
)

// insertKind is the data of the insert template.
type insertKind struct {
	*kind
	Duplicate Duplicate
	// Channel is the channel to notify with the kind's name, as a string literal; "" for none.
	Channel string
}

// Params lists the parameters of the data columns, $1 to $n.
func (k insertKind) Params() string {
	p := make([]string, len(k.data))
	for i := range p {
		p[i] = fmt.Sprintf("$%d", i+1)
	}
	return strings.Join(p, ", ")
}

// ScheduleParams are the parameters after the data columns: the time the job may start, and the delay
// from the database's clock when that is NULL.
func (k insertKind) ScheduleParams() [2]int { return [2]int{len(k.data) + 1, len(k.data) + 2} }

// Excluded sets every data column to the inserted row's.
func (k insertKind) Excluded() string {
	set := make([]string, len(k.data))
	for i, c := range k.data {
		set[i] = c + " = EXCLUDED." + c
	}
	return strings.Join(set, ", ")
}

// insertSQL inserts a job: $1..$n its data columns, then its start time and its delay. It returns the
// id and whether the row was a waiting duplicate. A kind with unique fields meets a never-started job
// of the same fields in the until-executed unique index, and updates it as Duplicate says; when it
// keeps it, the update is a no-op rather than DO NOTHING: it locks and returns the waiting row in the
// same statement, so the existing id comes back without a second query that could race with a claim.
// With a channel, the statement notifies it when its transaction commits.
const insertSQL = `{{if .Channel}}WITH ins AS ({{end}}INSERT INTO {{.Table}} AS j ({{.Columns ""}}, process_after)
VALUES ({{.Params}}, COALESCE(${{index .ScheduleParams 0}}::timestamptz, now() + ${{index .ScheduleParams 1}}::interval))
{{- if .Unique}}
ON CONFLICT ({{.UniqueCols}}) WHERE {{neverRan ""}} DO UPDATE SET {{template "duplicateSet" .}}
{{- end}}
RETURNING id, xmax <> 0 AS duplicate
{{- if .Channel}})
SELECT ins.id, ins.duplicate FROM ins, pg_notify({{.Channel}}, {{.Name}}) AS n{{end}}`

const duplicateSetSQL = `
{{- if eq .Duplicate "keep"}}lock_token = j.lock_token
{{- else if eq .Duplicate "replace"}}{{.Excluded}}, process_after = EXCLUDED.process_after, updated_at = now()
{{- else if eq .Duplicate "replace-data"}}{{.Excluded}}, updated_at = now()
{{- else if eq .Duplicate "replace-schedule"}}process_after = EXCLUDED.process_after, updated_at = now()
{{- end}}`

// Insert returns the insert statement of info that meets a waiting duplicate as dup says (for a kind
// without unique fields every dup gives the same statement), notifying channel ("" for no
// notification).
func Insert(info *jobinfo.Info, dup Duplicate, channel string) string {
	k := insertKind{kind: newKind(info), Duplicate: dup}
	if channel != "" {
		k.Channel = quote(channel)
	}
	return render("insert", k)
}

var _ = parse(statements, map[string]string{"insert": insertSQL, "duplicateSet": duplicateSetSQL})
