package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/dashboard"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

// testToken is the token of the dashboards under test; basic auth is testUser/testPassword.
const (
	testToken    = "t0ken-for-the-dashboard-tests"
	testUser     = "ops"
	testPassword = "password-for-the-tests"
)

// The kinds of the tests.
type (
	// webhook has a one-column key and a configured key limit of 2.
	webhook struct {
		CustomerID int64  `jobpipe:"customer_id,key"`
		URL        string `jobpipe:"url"`
	}
	// cleanup has no key.
	cleanup struct {
		Target string `jobpipe:"target"`
	}
	// tenantSync has a key of two columns: its key values are JSON arrays.
	tenantSync struct {
		Tenant string `jobpipe:"tenant,key"`
		Shard  int64  `jobpipe:"shard,key"`
	}
)

// fixture is a migrated schema holding the three kinds and one webhook job in each state, plus a
// scheduled one; ids maps "waiting", "scheduled", "running", "processed", "failed" (webhook) and
// "cleanup" (a waiting cleanup job) to the jobs' ids.
type fixture struct {
	s   *testenv.Schema
	ids map[string]int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	s := testenv.NewSchema(t)
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	createKind(t, s, jobinfo.MustDefine[webhook]("webhook", jobinfo.KeyLimit(2)))
	createKind(t, s, jobinfo.MustDefine[cleanup]("cleanup"))
	createKind(t, s, jobinfo.MustDefine[tenantSync]("tenant_sync"))
	f := &fixture{s: s, ids: map[string]int64{}}
	for _, j := range []struct{ name, cols, values string }{
		{"waiting", "", ""},
		{"scheduled", ", process_after", ", now() + interval '1 hour'"},
		{"running", ", attempts_made, started_at, lease_expires_at, lease_owner, lock_token, lock_slot",
			", 1, now(), now() + interval '5 minutes', 'node-a', 7, 0"},
		{"processed", ", attempts_made, started_at, processed_at", ", 1, now() - interval '1 minute', now()"},
		{"failed", ", attempts_made, started_at, failed_at, last_error",
			", 25, now() - interval '1 minute', now(), 'connection refused by https://example.com/hook'"},
	} {
		f.ids[j.name] = f.insert(t, fmt.Sprintf(`INSERT INTO webhook (customer_id, url%s) VALUES (42, 'https://example.com/%s'%s) RETURNING id`,
			j.cols, j.name, j.values))
	}
	f.ids["cleanup"] = f.insert(t, `INSERT INTO cleanup (target) VALUES ('tmp') RETURNING id`)
	return f
}

// createKind creates the kind's table and registers it, as a migration and a dispatcher do.
func createKind[T any](t *testing.T, s *testenv.Schema, kind *jobinfo.Kind[T]) {
	t.Helper()
	ctx := context.Background()
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	if err := kind.Register(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) insert(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	var id int64
	if err := f.s.Pool.QueryRow(context.Background(), sql, args...).Scan(&id); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return id
}

// handler returns a dashboard over the fixture's schema; cfg's DB is filled in. Its log goes to
// the test's log.
func (f *fixture) handler(t *testing.T, cfg dashboard.Config) *dashboard.Handler {
	t.Helper()
	cfg.DB = f.s.Pool
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	h, err := dashboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// withToken and withBasic are the usual configurations.
var (
	withToken = dashboard.Config{Token: testToken}
	withBoth  = dashboard.Config{Token: testToken, BasicAuthUser: testUser, BasicAuthPassword: testPassword}
)

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// state is each job's state, "<id> <state>", as jobinfo's conditions define it.
func (f *fixture) states(t *testing.T, table string) []string {
	t.Helper()
	cases := []string{}
	for _, s := range jobinfo.States {
		cases = append(cases, fmt.Sprintf("WHEN %s THEN '%s'", jobinfo.StateCondition(s), s))
	}
	return f.strings(t, fmt.Sprintf(`SELECT id || ' ' || CASE %s ELSE '?' END FROM %s ORDER BY id`,
		strings.Join(cases, " "), pgx.Identifier{table}.Sanitize()))
}

// snapshot is every row of every table the dashboard can change, as JSON: equal snapshots mean
// nothing changed.
func (f *fixture) snapshot(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"webhook", "cleanup", "tenant_sync", "jobpipe_kind_limits", "jobpipe_key_limits"} {
		rows := f.strings(t, fmt.Sprintf(`SELECT to_jsonb(t)::text FROM %s t ORDER BY 1`, pgx.Identifier{table}.Sanitize()))
		fmt.Fprintf(&b, "%s: %s\n", table, strings.Join(rows, "\n  "))
	}
	return b.String()
}

// jobRows maps each job of table to its row as JSON.
func (f *fixture) jobRows(t *testing.T, table string) map[int64]string {
	t.Helper()
	rows, err := f.s.Pool.Query(context.Background(), fmt.Sprintf(`SELECT id, to_jsonb(t)::text FROM %s t`, pgx.Identifier{table}.Sanitize()))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]string{}
	var id int64
	var row string
	_, err = pgx.ForEachRow(rows, []any{&id, &row}, func() error { out[id] = row; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// changedIDs returns the ids whose rows differ between two jobRows, sorted.
func changedIDs(before, after map[int64]string) []int64 {
	var ids []int64
	for id, row := range after {
		if before[id] != row {
			ids = append(ids, id)
		}
	}
	for id := range before {
		if _, ok := after[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// limitRows is what jobpipe_kind_limits and jobpipe_key_limits hold, one string per row.
func (f *fixture) limitRows(t *testing.T) []string {
	t.Helper()
	return f.strings(t, `SELECT format('%s max_running=%s key_limit=%s paused=%s', kind,
    coalesce(max_running::text, 'NULL'), coalesce(key_limit::text, 'NULL'), paused::text)
FROM jobpipe_kind_limits
UNION ALL
SELECT format('%s %s key_limit=%s paused=%s', kind, to_json(key_value),
    coalesce(key_limit::text, 'NULL'), paused::text)
FROM jobpipe_key_limits
ORDER BY 1`)
}

func (f *fixture) strings(t *testing.T, sql string) []string {
	t.Helper()
	rows, err := f.s.Pool.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// client sends requests to a handler in-process, keeping cookies as a browser does.
type client struct {
	t       *testing.T
	h       http.Handler
	host    string
	cookies map[string]*http.Cookie
	header  http.Header
}

func newClient(t *testing.T, h http.Handler) *client {
	return &client{t: t, h: h, host: "127.0.0.1:8080", cookies: map[string]*http.Cookie{}, header: http.Header{}}
}

// do sends the request; form, when not nil, is the POST body.
func (c *client) do(method, path string, form url.Values, header ...string) *httptest.ResponseRecorder {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, path, body)
	req.Host = c.host
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	for _, ck := range c.cookies {
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	for _, ck := range rec.Result().Cookies() {
		if ck.MaxAge < 0 {
			delete(c.cookies, ck.Name)
		} else {
			c.cookies[ck.Name] = ck
		}
	}
	return rec
}

func (c *client) get(path string, header ...string) *httptest.ResponseRecorder {
	c.t.Helper()
	return c.do(http.MethodGet, path, nil, header...)
}

func (c *client) post(path string, form url.Values, header ...string) *httptest.ResponseRecorder {
	c.t.Helper()
	return c.do(http.MethodPost, path, form, header...)
}

var csrfPattern = regexp.MustCompile(`name="csrf_token" value="([^"]*)"`)

// csrf loads path and returns the CSRF token of its forms.
func (c *client) csrf(path string) string {
	c.t.Helper()
	rec := c.get(path)
	m := csrfPattern.FindStringSubmatch(rec.Body.String())
	if rec.Code != http.StatusOK || m == nil {
		c.t.Fatalf("GET %s: %d, no CSRF token in:\n%s", path, rec.Code, rec.Body)
	}
	return m[1]
}

// login logs in through the form with the token.
func (c *client) login(token string) *httptest.ResponseRecorder {
	c.t.Helper()
	csrf := c.csrf("/login")
	return c.post("/login", url.Values{"csrf_token": {csrf}, "token": {token}})
}

// loggedIn returns a client logged in with the test token, and its CSRF token.
func loggedIn(t *testing.T, h http.Handler) (*client, string) {
	t.Helper()
	c := newClient(t, h)
	if rec := c.login(testToken); rec.Code != http.StatusSeeOther {
		t.Fatalf("login: %d %s", rec.Code, rec.Body)
	}
	return c, c.csrf("/kinds/webhook")
}

// flash follows a redirect and returns the flash message the page shows.
func (c *client) flash(rec *httptest.ResponseRecorder) string {
	c.t.Helper()
	if rec.Code != http.StatusSeeOther {
		c.t.Fatalf("want a redirect (303), got %d:\n%s", rec.Code, rec.Body)
	}
	page := c.get(rec.Header().Get("Location"))
	m := flashPattern.FindStringSubmatch(page.Body.String())
	if m == nil {
		c.t.Fatalf("no flash message on %s:\n%s", rec.Header().Get("Location"), page.Body)
	}
	return htmlText(m[1])
}

var flashPattern = regexp.MustCompile(`(?s)id="flash">(.*?)</div>`)

// errorMessage returns the message of an error page.
func errorMessage(rec *httptest.ResponseRecorder) string {
	m := regexp.MustCompile(`(?s)id="error">(.*?)</div>`).FindStringSubmatch(rec.Body.String())
	if m == nil {
		return rec.Body.String()
	}
	return htmlText(m[1])
}

func htmlText(s string) string {
	return strings.NewReplacer("&#34;", `"`, "&#39;", "'", "&lt;", "<", "&gt;", ">", "&amp;", "&", "&quot;", `"`).Replace(s)
}

func form(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v
}
