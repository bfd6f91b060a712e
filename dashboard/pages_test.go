package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/jobpipe/jobpipe/dashboard"
)

// The overview lists every kind with its counts, in the page and in /api/summary.
func TestOverviewCounts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := newClient(t, f.handler(t, withToken))

	rec := c.get("/")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	for _, want := range []string{
		`<tr data-kind="webhook">`,
		`<td class="num" data-field="waiting">2</td>`,
		`<td class="num" data-field="due">1</td>`,
		`<td class="num" data-field="running">1 / ∞</td>`,
		`<td class="num" data-field="processed">1</td>`,
		`<td class="num bad" data-field="failed">1</td>`,
		`<tr data-kind="cleanup">`,
		`<tr data-kind="tenant_sync">`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview lacks %s:\n%s", want, body)
		}
	}

	rec = c.get("/api/summary")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /api/summary: %d %s\n%s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	var got struct {
		Kinds []struct {
			Kind                                     string
			Waiting, Due, Running, Processed, Failed int64
			MaxRunning                               int `json:"max_running"`
			Paused                                   bool
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, k := range got.Kinds {
		lines = append(lines, fmt.Sprintf("%s w=%d d=%d r=%d p=%d f=%d max=%d paused=%t", k.Kind, k.Waiting, k.Due, k.Running, k.Processed, k.Failed, k.MaxRunning, k.Paused))
	}
	want := []string{
		"cleanup w=1 d=1 r=0 p=0 f=0 max=-1 paused=false",
		"tenant_sync w=0 d=0 r=0 p=0 f=0 max=-1 paused=false",
		"webhook w=2 d=1 r=1 p=1 f=1 max=-1 paused=false",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("summary:\n got %q\nwant %q", lines, want)
	}
}

// A kind whose dispatchers wait for a quorum of Redis lock nodes shows it as its status in the
// overview and /api/summary, and on its page; a row its dispatcher stopped refreshing does not count.
func TestLockWaitShown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, err := f.s.Pool.Exec(t.Context(), `INSERT INTO jobpipe_lock_waits (kind, node_name, since, error, updated_at) VALUES
	('webhook', 'web-1', '2030-01-02 03:04:05Z', 'node 127.0.0.1:6390: dial tcp 127.0.0.1:6390: connect: connection refused', now()),
	('cleanup', 'crashed', '2030-01-02 03:04:05Z', 'node 127.0.0.1:6390: EOF', now() - interval '10 minutes')`); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, f.handler(t, withToken))
	const wait = "waiting for Redis quorum since 2030-01-02 03:04:05 UTC in dispatcher web-1 (node 127.0.0.1:6390: dial tcp 127.0.0.1:6390: connect: connection refused)"
	body := c.get("/").Body.String()
	for _, want := range []string{
		`<td><span class="badge badge-lockwait" data-field="status">waiting for Redis</span><div class="muted" data-field="lock">` + wait + `</div></td>`,
		`<td><span class="badge badge-active" data-field="status">active</span><div class="muted" data-field="lock"></div></td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview lacks %s:\n%s", want, body)
		}
	}
	rec := c.get("/api/summary")
	var got struct {
		Kinds []struct {
			Kind        string
			LockWaits   []string          `json:"lock_waits"`
			StatusClass string            `json:"status_class"`
			Text        map[string]string `json:"text"`
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, k := range got.Kinds {
		lines = append(lines, fmt.Sprintf("%s %s %q %q %q", k.Kind, k.StatusClass, k.Text["status"], k.Text["lock"], k.LockWaits))
	}
	want := []string{
		`cleanup active "active" "" []`,
		`tenant_sync active "active" "" []`,
		fmt.Sprintf(`webhook lockwait "waiting for Redis" %q [%q]`, wait, wait),
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("summary:\n got %q\nwant %q", lines, want)
	}
	if page := c.get("/kinds/webhook").Body.String(); !strings.Contains(page, `<div class="flash flash-error" role="alert" data-lock-wait>`+wait+`</div>`) {
		t.Errorf("the kind page lacks the wait:\n%s", page)
	}
	if page := c.get("/kinds/cleanup").Body.String(); strings.Contains(page, "data-lock-wait") {
		t.Errorf("cleanup's page shows a stale wait:\n%s", page)
	}
}

// The kind page filters by state and key and pages with a cursor, newest first.
func TestKindPageFiltersAndPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// 60 more failed jobs of key 7: more than a page.
	if _, err := f.s.Pool.Exec(t.Context(), `INSERT INTO webhook (customer_id, url, failed_at, last_error)
SELECT 7, 'https://example.com/' || i, now(), 'boom ' || i FROM generate_series(1, 60) i`); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, f.handler(t, withToken))

	ids := func(path string) []string {
		t.Helper()
		rec := c.get(path)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, rec.Code, rec.Body)
		}
		var out []string
		for _, m := range rowPattern.FindAllStringSubmatch(rec.Body.String(), -1) {
			out = append(out, m[1]+" "+m[2])
		}
		return out
	}
	first := ids("/kinds/webhook?state=failed")
	if len(first) != 50 || first[0] != "65 failed" || first[49] != "16 failed" {
		t.Fatalf("first page of failed jobs: %d rows %q ... %q", len(first), first[0], first[len(first)-1])
	}
	page := c.get("/kinds/webhook?state=failed").Body.String()
	if !strings.Contains(page, `href="/kinds/webhook?before=16&amp;state=failed" id="page-older"`) || strings.Contains(page, "page-newest") {
		t.Fatalf("first page's links:\n%s", page)
	}
	second := ids("/kinds/webhook?before=16&state=failed")
	want := []string{}
	for id := 15; id >= 6; id-- {
		want = append(want, fmt.Sprint(id, " failed"))
	}
	want = append(want, "5 failed") // the fixture's failed job, key 42
	if strings.Join(second, ",") != strings.Join(want, ",") {
		t.Errorf("second page %q, want %q", second, want)
	}
	page = c.get("/kinds/webhook?before=16&state=failed").Body.String()
	if strings.Contains(page, "page-older") || !strings.Contains(page, `href="/kinds/webhook?state=failed" id="page-newest"`) {
		t.Errorf("last page's links:\n%s", page)
	}
	if got := ids("/kinds/webhook?key=42"); strings.Join(got, ",") != "5 failed,4 processed,3 running,2 waiting,1 waiting" {
		t.Errorf("key 42: %q", got)
	}
	if got := ids("/kinds/webhook?key=42&state=waiting"); strings.Join(got, ",") != "2 waiting,1 waiting" {
		t.Errorf("key 42 waiting: %q", got)
	}
	if got := ids("/kinds/webhook?key=1000"); len(got) != 0 {
		t.Errorf("key 1000: %q", got)
	}
}

var rowPattern = regexp.MustCompile(`<tr data-id="(\d+)" data-state="(\w+)">`)

// The job page shows the job's data, attempts, error, times and lease holder.
func TestJobPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c, _ := loggedIn(t, f.handler(t, withToken))
	for _, tc := range []struct {
		job  string
		want []string
		not  []string
	}{
		{"running", []string{
			`<span class="badge badge-running" id="job-state">running</span>`,
			"{\n  &#34;customer_id&#34;: 42,\n  &#34;url&#34;: &#34;https://example.com/running&#34;\n}",
			`<dd id="job-attempts">1 of 25</dd>`,
			"<dt>Lease holder</dt><dd><code>node-a</code></dd>",
			"<dt>Lock token</dt><dd>7</dd>",
			"<dt>Lock slot</dt><dd>0</dd>",
			"A running job is left to its worker",
		}, []string{"/actions/"}},
		{"failed", []string{
			`<pre class="error-text" id="job-error">connection refused by https://example.com/hook</pre>`,
			`<dd id="job-attempts">25 of 25</dd>`,
			`action="/kinds/webhook/actions/retry"`,
			`<input type="hidden" name="back" value="/kinds/webhook/jobs/5">`,
		}, []string{"actions/discard", "actions/run-now"}},
		{"scheduled", []string{`action="/kinds/webhook/actions/run-now"`, `action="/kinds/webhook/actions/discard"`}, []string{"actions/retry"}},
		{"waiting", []string{`action="/kinds/webhook/actions/discard"`}, []string{"actions/retry", "actions/run-now"}},
	} {
		rec := c.get(fmt.Sprintf("/kinds/webhook/jobs/%d", f.ids[tc.job]))
		body := rec.Body.String()
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d\n%s", tc.job, rec.Code, body)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s job page lacks %q", tc.job, w)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(body, w) {
				t.Errorf("%s job page has %q", tc.job, w)
			}
		}
		if t.Failed() {
			t.Fatalf("page:\n%s", body)
		}
	}
}

// Every response carries the security headers; the assets are embedded and served with their
// types, and nothing is loaded from elsewhere.
func TestSecurityHeadersAndAssets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := newClient(t, f.handler(t, withToken))
	for _, path := range []string{"/", "/kinds/webhook", "/login", "/api/summary", "/static/dashboard.css", "/kinds/nosuch"} {
		rec := c.get(path)
		for header, want := range map[string]string{
			"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'",
			"X-Frame-Options":         "DENY",
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "same-origin",
		} {
			if got := rec.Header().Get(header); got != want {
				t.Errorf("GET %s: %s %q, want %q", path, header, got, want)
			}
		}
	}
	for path, ctype := range map[string]string{
		"/static/dashboard.css": "text/css; charset=utf-8",
		"/static/dashboard.js":  "text/javascript; charset=utf-8",
	} {
		rec := c.get(path)
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != ctype {
			t.Errorf("GET %s: %d %q", path, rec.Code, rec.Header().Get("Content-Type"))
		}
		if strings.Contains(rec.Body.String(), "http://") || strings.Contains(rec.Body.String(), "https://") || strings.Contains(rec.Body.String(), "@import") {
			t.Errorf("%s refers to another site", path)
		}
	}
	// The pages load scripts and styles from the dashboard only, with no inline ones (CSP forbids them).
	body := c.get("/").Body.String()
	for _, bad := range []string{"<style", "style=", "onclick", "<script>", `src="http`, `href="http`} {
		if strings.Contains(body, bad) {
			t.Errorf("the overview contains %q", bad)
		}
	}
}

// Mounted under a base path, the dashboard serves only below it and prefixes its links and cookies.
func TestBasePath(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := f.handler(t, dashboard.Config{Token: testToken, BasePath: "/ops/jobs"})
	c := newClient(t, h)
	if rec := c.get("/kinds/webhook"); rec.Code != http.StatusNotFound {
		t.Errorf("outside the base path: %d", rec.Code)
	}
	if rec := c.get("/ops/jobsx"); rec.Code != http.StatusNotFound {
		t.Errorf("a sibling of the base path: %d", rec.Code)
	}
	if rec := c.get("/ops/jobs"); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/ops/jobs/" {
		t.Errorf("the base path without slash: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	rec := c.get("/ops/jobs/")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `<a href="/ops/jobs/kinds/webhook">webhook</a>`) ||
		!strings.Contains(rec.Body.String(), `href="/ops/jobs/static/dashboard.css"`) || !strings.Contains(rec.Body.String(), `data-url="/ops/jobs/api/summary"`) {
		t.Fatalf("overview under the base path: %d\n%s", rec.Code, rec.Body)
	}
	if ck := c.cookies["jobpipe_dashboard_session"]; ck == nil || ck.Path != "/ops/jobs/" {
		t.Errorf("session cookie %+v, want path /ops/jobs/", ck)
	}
	csrf := c.csrf("/ops/jobs/login")
	rec = c.post("/ops/jobs/login", form("csrf_token", csrf, "token", testToken))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/ops/jobs/" {
		t.Fatalf("login: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	csrf = c.csrf("/ops/jobs/kinds/webhook")
	rec = c.post("/ops/jobs/kinds/webhook/actions/set-max-running", form("csrf_token", csrf, "value", "4", "back", "/elsewhere"))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/ops/jobs/kinds/webhook" {
		t.Fatalf("action: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	if got := f.limitRows(t); strings.Join(got, ",") != "webhook max_running=4 key_limit=NULL paused=false" {
		t.Errorf("limits %q", got)
	}
}

// A kind whose table is missing is named on the overview, and the other kinds are shown all the same.
func TestOverviewWithAMissingTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, err := f.s.Pool.Exec(context.Background(), `DROP TABLE cleanup`); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, f.handler(t, withToken))
	rec := c.get("/")
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(body, `<tr data-kind="webhook">`) || strings.Contains(body, `<tr data-kind="cleanup">`) ||
		!strings.Contains(body, `<div class="flash flash-error" role="alert">admin: the kind&#39;s table is missing: kind &#34;cleanup&#34; has no table &#34;cleanup&#34;`) {
		t.Errorf("GET / with cleanup's table dropped: %d\n%s", rec.Code, body)
	}
	rec = c.get("/api/summary")
	var got struct {
		Kinds    []struct{ Kind string }
		Problems []string
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("GET /api/summary: %d %v\n%s", rec.Code, err, rec.Body)
	}
	if len(got.Kinds) != 2 || got.Kinds[0].Kind != "tenant_sync" || got.Kinds[1].Kind != "webhook" || len(got.Problems) != 1 ||
		!strings.Contains(got.Problems[0], `kind "cleanup" has no table "cleanup"`) {
		t.Errorf("GET /api/summary: %+v", got)
	}
}
