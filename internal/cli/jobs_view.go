package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jobpipe/jobpipe/admin"
)

// What the jobs commands print. The JSON field names are documented in docs/cli.md and kept stable.

// jobJSON is one job in "jobs list --json" and "jobs show --json".
type jobJSON struct {
	ID             int64           `json:"id"`
	State          string          `json:"state"`
	Key            *string         `json:"key"` // null for kinds without a key
	Data           json.RawMessage `json:"data"`
	AttemptsMade   int             `json:"attempts_made"`
	MaxAttempts    int             `json:"max_attempts"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	ProcessAfter   *time.Time      `json:"process_after"`
	StartedAt      *time.Time      `json:"started_at"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at"`
	LeaseOwner     *string         `json:"lease_owner"`
	LockSlot       *int            `json:"lock_slot"`
	LastError      *string         `json:"last_error"`
	ProcessedAt    *time.Time      `json:"processed_at"`
	FailedAt       *time.Time      `json:"failed_at"`
}

func newJobJSON(j admin.Job) jobJSON {
	out := jobJSON{ID: j.ID, State: string(j.State), Data: j.Data, AttemptsMade: j.AttemptsMade,
		MaxAttempts: j.MaxAttempts, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt, ProcessAfter: j.ProcessAfter,
		StartedAt: j.StartedAt, LeaseExpiresAt: j.LeaseExpiresAt, LeaseOwner: j.LeaseOwner, LockSlot: j.LockSlot,
		LastError: j.LastError, ProcessedAt: j.ProcessedAt, FailedAt: j.FailedAt}
	if j.Key != "" {
		out.Key = &j.Key
	}
	return out
}

func jobsJSON(jobs []admin.Job) []jobJSON {
	out := make([]jobJSON, len(jobs))
	for i, j := range jobs {
		out[i] = newJobJSON(j)
	}
	return out
}

// writeJobList prints one line a job, and how to get the next page when the page is full.
func writeJobList(e *env, k *admin.Kind, jobs []admin.Job, f admin.Filter) error {
	if len(jobs) == 0 {
		fmt.Fprintf(e.Stdout, "%s: no jobs match\n", k.Name())
		return nil
	}
	keyed := len(k.Info.Key) > 0
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	header := "ID\tSTATE\t"
	if keyed {
		header += "KEY\t"
	}
	fmt.Fprintln(tw, header+"ATTEMPTS\tCREATED\tDUE\tDATA")
	for _, j := range jobs {
		line := fmt.Sprintf("%d\t%s\t", j.ID, j.State)
		if keyed {
			line += showKey(j.Key) + "\t"
		}
		due := "-"
		if j.ProcessAfter != nil {
			due = timeText(*j.ProcessAfter)
		}
		fmt.Fprintf(tw, "%s%d/%d\t%s\t%s\t%s\n", line, j.AttemptsMade, j.MaxAttempts, timeText(j.CreatedAt), due, shorten(string(j.Data), 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	limit := f.Limit
	if limit == 0 {
		limit = admin.DefaultLimit
	}
	if len(jobs) == limit {
		fmt.Fprintf(e.Stdout, "more may follow: add --before %d\n", jobs[len(jobs)-1].ID)
	}
	return nil
}

// writeJob prints one job, a field a line, then its data indented.
func writeJob(e *env, k *admin.Kind, j admin.Job) error {
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	row := func(name, value string) { fmt.Fprintf(tw, "%s:\t%s\n", name, value) }
	row("kind", k.Name())
	row("id", strconv.FormatInt(j.ID, 10))
	row("state", string(j.State))
	if len(k.Info.Key) > 0 {
		row("key", showKey(j.Key))
	}
	row("attempts", fmt.Sprintf("%d of %d", j.AttemptsMade, j.MaxAttempts))
	row("created", timeText(j.CreatedAt))
	row("updated", timeText(j.UpdatedAt))
	row("due", timeOrDash(j.ProcessAfter, "on enqueue"))
	row("started", timeOrDash(j.StartedAt, "-"))
	row("lease expires", timeOrDash(j.LeaseExpiresAt, "-"))
	row("lease holder", stringOr(j.LeaseOwner, "-"))
	if j.LockSlot != nil {
		row("slot", strconv.Itoa(*j.LockSlot))
	}
	row("processed", timeOrDash(j.ProcessedAt, "-"))
	row("failed", timeOrDash(j.FailedAt, "-"))
	row("last error", stringOr(j.LastError, "-"))
	if err := tw.Flush(); err != nil {
		return err
	}
	var data bytes.Buffer
	if err := json.Indent(&data, j.Data, "  ", "  "); err != nil {
		data.Reset()
		data.Write(j.Data)
	}
	fmt.Fprintf(e.Stdout, "data:\n  %s\n", data.String())
	return nil
}

// actionJSON is what "jobs retry|discard|run-now --json" print.
type actionJSON struct {
	Kind    string        `json:"kind"`
	Action  string        `json:"action"`
	Changed []int64       `json:"changed"`
	Skipped []skippedJSON `json:"skipped"`
}

type skippedJSON struct {
	ID     int64  `json:"id"`
	Reason string `json:"reason"`
}

func newActionJSON(kind, action string, r admin.ActionResult) actionJSON {
	out := actionJSON{Kind: kind, Action: action, Changed: r.Changed, Skipped: []skippedJSON{}}
	if out.Changed == nil {
		out.Changed = []int64{}
	}
	for _, s := range r.Skipped {
		out.Skipped = append(out.Skipped, skippedJSON(s))
	}
	return out
}

// actionDone says what an action did to the changed jobs.
var actionDone = map[string]string{
	"retry":   "retried: waiting, due now",
	"discard": "discarded: failed",
	"run-now": "due now",
}

func writeAction(e *env, kind, action string, r admin.ActionResult) {
	if len(r.Changed) > 0 {
		fmt.Fprintf(e.Stdout, "%s: %s %s %s\n", kind, plural(len(r.Changed), "job"), joinIDs(r.Changed), actionDone[action])
	} else {
		fmt.Fprintf(e.Stdout, "%s: no job changed\n", kind)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(e.Stdout, "%s: job %d left as it is: %s\n", kind, s.ID, s.Reason)
	}
}

// timeText is a time in UTC to the second, as RFC 3339.
func timeText(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func timeOrDash(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return timeText(*t)
}

func stringOr(s *string, none string) string {
	if s == nil {
		return none
	}
	return *s
}

// shorten cuts s to n runes, marking the cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
