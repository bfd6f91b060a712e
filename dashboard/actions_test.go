package dashboard_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Each job action changes exactly the jobs it names that qualify, reports the others with their
// reason, and redirects back to the form's page.
func TestJobActions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c, csrf := loggedIn(t, f.handler(t, withToken))
	id := func(name string) string { return fmt.Sprint(f.ids[name]) }

	for _, tc := range []struct {
		name    string
		action  string
		form    []string
		changed []string // fixture names of the jobs that change
		states  []string // webhook's states after, by fixture name
		flash   string
	}{
		{"retry a failed job", "retry", []string{"id", id("failed")}, []string{"failed"},
			[]string{"waiting", "scheduled", "running", "processed", "failed=waiting"},
			"Retried 1 job (#5): now waiting, due at once."},
		{"retry processed, running and waiting jobs", "retry", []string{"id", id("processed"), "id", id("running"), "id", id("waiting")},
			[]string{"processed"},
			[]string{"waiting", "scheduled", "running", "processed=waiting", "failed=waiting"},
			"Retried 1 job (#4): now waiting, due at once. Left 2 jobs as they were: #1 (already waiting), #3 (running)."},
		{"run a scheduled job now", "run-now", []string{"id", id("scheduled"), "id", id("waiting")}, []string{"scheduled"},
			[]string{"waiting", "scheduled", "running", "processed=waiting", "failed=waiting"},
			"Made 1 job (#2) due now: they start as soon as their key's order and limits allow. Left 1 job as it was: #1 (already due)."},
		{"discard a waiting job with a reason", "discard", []string{"id", id("waiting"), "reason", "customer <gone>"}, []string{"waiting"},
			[]string{"waiting=failed", "scheduled", "running", "processed=waiting", "failed=waiting"},
			"Discarded 1 job (#1): now failed."},
		{"discard a running job: nothing changes", "discard", []string{"id", id("running"), "id", "999"}, nil,
			[]string{"waiting=failed", "scheduled", "running", "processed=waiting", "failed=waiting"},
			"No job changed. Left 2 jobs as they were: #3 (running: a running job is never discarded; it ends on its own, or is retried when its lease expires), #999 (no such job)."},
		{"repeated ids count once", "retry", []string{"id", id("waiting"), "id", id("waiting")}, []string{"waiting"},
			[]string{"waiting", "scheduled", "running", "processed=waiting", "failed=waiting"},
			"Retried 1 job (#1): now waiting, due at once."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.jobRows(t, "webhook")
			limitsBefore := f.limitRows(t)
			rec := c.post("/kinds/webhook/actions/"+tc.action, form(append([]string{"csrf_token", csrf, "back", "/kinds/webhook?state=failed"}, tc.form...)...))
			if rec.Header().Get("Location") != "/kinds/webhook?state=failed" {
				t.Errorf("redirect to %q, want back to the form's page", rec.Header().Get("Location"))
			}
			if got := c.flash(rec); got != tc.flash {
				t.Errorf("flash:\n got %q\nwant %q", got, tc.flash)
			}
			var want []int64
			for _, name := range tc.changed {
				want = append(want, f.ids[name])
			}
			if got := changedIDs(before, f.jobRows(t, "webhook")); !slices.Equal(got, want) {
				t.Errorf("changed jobs %v, want %v", got, want)
			}
			var wantStates []string
			for _, s := range tc.states {
				name, state, moved := strings.Cut(s, "=")
				if !moved {
					state = name
				}
				if name == "scheduled" && !moved {
					state = "waiting"
				}
				wantStates = append(wantStates, fmt.Sprintf("%d %s", f.ids[name], state))
			}
			if got := f.states(t, "webhook"); !slices.Equal(got, wantStates) {
				t.Errorf("states %q, want %q", got, wantStates)
			}
			if got := f.limitRows(t); !slices.Equal(got, limitsBefore) {
				t.Errorf("limits changed: %q", got)
			}
		})
	}

	// What the actions wrote, beyond the states.
	var lastError string
	var due bool
	if err := f.s.Pool.QueryRow(t.Context(), `SELECT last_error, process_after <= now() FROM webhook WHERE id = $1`, f.ids["waiting"]).
		Scan(&lastError, &due); err != nil {
		t.Fatal(err)
	}
	if lastError != "discarded by an operator: customer <gone>" {
		t.Errorf("discarded job's last_error %q", lastError)
	}
	if err := f.s.Pool.QueryRow(t.Context(), `SELECT process_after <= now() FROM webhook WHERE id = $1`, f.ids["scheduled"]).Scan(&due); err != nil || !due {
		t.Errorf("the job run now is not due: %v", err)
	}
	// The other kinds are untouched.
	if got := f.states(t, "cleanup"); !slices.Equal(got, []string{id("cleanup") + " waiting"}) {
		t.Errorf("cleanup states %q", got)
	}
}

// Each limit action stores exactly what it says in jobpipe_kind_limits or jobpipe_key_limits, and
// changes no job.
func TestLimitActions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c, csrf := loggedIn(t, f.handler(t, withToken))
	jobs := f.snapshotJobs(t)

	for _, step := range []struct {
		kind, action string
		form         []string
		want         []string
		flash        string
	}{
		{"webhook", "set-max-running", []string{"value", "5"},
			[]string{"webhook max_running=5 key_limit=NULL paused=false"}, "Set the total limit of webhook to 5."},
		{"webhook", "set-key-limit", []string{"value", " 3 "},
			[]string{"webhook max_running=5 key_limit=3 paused=false"}, "Set the per-key limit of webhook to 3."},
		{"webhook", "pause", nil,
			[]string{"webhook max_running=5 key_limit=3 paused=true"}, "Paused webhook: no new job starts; running jobs finish."},
		{"webhook", "set-key", []string{"key", "42", "value", "0"},
			[]string{`webhook "42" key_limit=0 paused=false`, "webhook max_running=5 key_limit=3 paused=true"},
			"Set the limit of webhook key 42 to 0 (halted: no new job starts)."},
		{"webhook", "pause-key", []string{"key", "7"},
			[]string{`webhook "42" key_limit=0 paused=false`, `webhook "7" key_limit=NULL paused=true`, "webhook max_running=5 key_limit=3 paused=true"},
			"Paused webhook key 7: no new job of it starts."},
		{"tenant_sync", "set-key", []string{"key", `[ "acme",3 ]`, "value", "2"},
			[]string{`tenant_sync "[\"acme\", 3]" key_limit=2 paused=false`, `webhook "42" key_limit=0 paused=false`, `webhook "7" key_limit=NULL paused=true`, "webhook max_running=5 key_limit=3 paused=true"},
			`Set the limit of tenant_sync key ["acme", 3] to 2.`},
		{"tenant_sync", "clear-key", []string{"key", `["acme", 3]`},
			[]string{`webhook "42" key_limit=0 paused=false`, `webhook "7" key_limit=NULL paused=true`, "webhook max_running=5 key_limit=3 paused=true"},
			`Cleared the limit of tenant_sync key ["acme", 3]: the per-key limit applies.`},
		{"webhook", "resume-key", []string{"key", "7"},
			[]string{`webhook "42" key_limit=0 paused=false`, "webhook max_running=5 key_limit=3 paused=true"}, "Resumed webhook key 7."},
		{"webhook", "clear-key", []string{"key", "42"},
			[]string{"webhook max_running=5 key_limit=3 paused=true"}, "Cleared the limit of webhook key 42: the per-key limit applies."},
		{"webhook", "resume", nil,
			[]string{"webhook max_running=5 key_limit=3 paused=false"}, "Resumed webhook."},
		{"webhook", "clear-key-limit", nil,
			[]string{"webhook max_running=5 key_limit=NULL paused=false"}, "Cleared the per-key limit of webhook: its configured limit applies."},
		{"cleanup", "set-max-running", []string{"value", "2147483647"},
			[]string{"cleanup max_running=2147483647 key_limit=NULL paused=false", "webhook max_running=5 key_limit=NULL paused=false"},
			"Set the total limit of cleanup to 2147483647."},
		{"webhook", "clear-max-running", nil,
			[]string{"cleanup max_running=2147483647 key_limit=NULL paused=false"}, "Cleared the total limit of webhook."},
	} {
		rec := c.post("/kinds/"+step.kind+"/actions/"+step.action, form(append([]string{"csrf_token", csrf}, step.form...)...))
		if rec.Header().Get("Location") != "/kinds/"+step.kind {
			t.Errorf("%s %s: redirect to %q", step.kind, step.action, rec.Header().Get("Location"))
		}
		if got := c.flash(rec); got != step.flash {
			t.Errorf("%s %s: flash\n got %q\nwant %q", step.kind, step.action, got, step.flash)
		}
		if got := f.limitRows(t); !slices.Equal(got, step.want) {
			t.Fatalf("%s %s: limits\n got %q\nwant %q", step.kind, step.action, got, step.want)
		}
	}
	if got := f.snapshotJobs(t); got != jobs {
		t.Errorf("jobs changed:\n%s\n%s", jobs, got)
	}
}

// A key is data: one that looks like SQL or HTML is stored as it is and shown escaped.
func TestHostileKeyStoredVerbatimShownEscaped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c, csrf := loggedIn(t, f.handler(t, withToken))
	key := `<script>alert(1)</script>'); DROP TABLE webhook; --`
	rec := c.post("/kinds/webhook/actions/pause-key", form("csrf_token", csrf, "key", key))
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("%d\n%s", rec.Code, rec.Body)
	}
	page := c.get("/kinds/webhook").Body.String()
	if strings.Contains(page, "<script>alert") || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;&#39;); DROP TABLE webhook; --") {
		t.Errorf("the key is not shown escaped:\n%s", page)
	}
	want := []string{fmt.Sprintf("webhook %q key_limit=NULL paused=true", key)}
	if got := f.limitRows(t); !slices.Equal(got, want) {
		t.Errorf("limits %q, want %q", got, want)
	}
	if got := f.states(t, "webhook"); len(got) != 5 {
		t.Errorf("webhook jobs %q", got)
	}
}

func (f *fixture) snapshotJobs(t *testing.T) string {
	t.Helper()
	s := f.snapshot(t)
	i := strings.Index(s, "jobpipe_kind_limits:")
	return s[:i]
}
