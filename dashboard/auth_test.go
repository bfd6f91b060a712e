package dashboard_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/jobpipe/jobpipe/dashboard"
)

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// A change needs authentication: without it the answer is 401 and nothing changes; with a bearer
// token, basic auth or a logged-in session (each with what CSRF needs) the change is made.
func TestChangesNeedAuthentication(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := f.handler(t, withBoth)
	failed := fmt.Sprint(f.ids["failed"])
	retry := "/kinds/webhook/actions/retry"

	refused := []struct {
		name   string
		header []string
		status int
	}{
		{"no credentials", nil, http.StatusUnauthorized},
		{"wrong bearer token", []string{"Authorization", "Bearer " + testToken + "x"}, http.StatusUnauthorized},
		{"bearer token as basic password", []string{"Authorization", basic(testUser, testToken)}, http.StatusUnauthorized},
		{"wrong basic user", []string{"Authorization", basic("root", testPassword)}, http.StatusUnauthorized},
		{"wrong basic password", []string{"Authorization", basic(testUser, testPassword+"x")}, http.StatusUnauthorized},
		{"unknown scheme", []string{"Authorization", "Token " + testToken}, http.StatusUnauthorized},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			before := f.snapshot(t)
			c := newClient(t, h)
			csrf := c.csrf("/login") // an anonymous session's valid token: it is not authentication
			rec := c.post(retry, form("csrf_token", csrf, "id", failed), tc.header...)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d:\n%s", rec.Code, tc.status, rec.Body)
			}
			if got := rec.Header().Get("WWW-Authenticate"); !strings.HasPrefix(got, "Basic ") {
				t.Errorf("WWW-Authenticate %q, want a basic challenge", got)
			}
			if after := f.snapshot(t); after != before {
				t.Errorf("the database changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	// Each accepted way changes the failed job, which is retried then failed again in between.
	accepted := []struct {
		name string
		do   func(c *client) int
	}{
		{"bearer token, no CSRF token needed", func(c *client) int {
			return c.post(retry, form("id", failed), "Authorization", "Bearer "+testToken).Code
		}},
		{"basic auth with its CSRF token", func(c *client) int {
			c.header.Set("Authorization", basic(testUser, testPassword))
			return c.post(retry, form("csrf_token", c.csrf("/kinds/webhook"), "id", failed)).Code
		}},
		{"session logged in with the token", func(c *client) int {
			c.login(testToken)
			return c.post(retry, form("csrf_token", c.csrf("/kinds/webhook"), "id", failed)).Code
		}},
		{"session logged in with user and password", func(c *client) int {
			csrf := c.csrf("/login")
			c.post("/login", form("csrf_token", csrf, "user", testUser, "password", testPassword))
			return c.post(retry, form("csrf_token", c.csrf("/kinds/webhook"), "id", failed)).Code
		}},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := f.s.Pool.Exec(t.Context(), `UPDATE webhook SET failed_at = now() WHERE id = $1`, f.ids["failed"]); err != nil {
				t.Fatal(err)
			}
			before := f.jobRows(t, "webhook")
			if status := tc.do(newClient(t, h)); status != http.StatusSeeOther {
				t.Fatalf("status %d, want 303", status)
			}
			if got := changedIDs(before, f.jobRows(t, "webhook")); !slices.Equal(got, []int64{f.ids["failed"]}) {
				t.Errorf("changed jobs %v, want only the failed one %d", got, f.ids["failed"])
			}
			if got := f.states(t, "webhook"); !slices.Contains(got, failed+" waiting") {
				t.Errorf("states %q: the failed job is not waiting", got)
			}
		})
	}
}

// Logging in checks the token in constant time and gives a new session; the cookie is HttpOnly and
// SameSite=Strict; logging out drops the right to change things; a forged or foreign cookie is an
// anonymous visitor.
func TestLoginSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := f.handler(t, withToken)
	c := newClient(t, h)

	page := c.get("/kinds/webhook")
	if strings.Contains(page.Body.String(), "/actions/") || !strings.Contains(page.Body.String(), `id="login-link"`) {
		t.Fatalf("an anonymous visitor sees action forms or no login link:\n%s", page.Body)
	}
	anon := c.cookies["jobpipe_dashboard_session"]
	if anon == nil || !anon.HttpOnly || anon.SameSite != http.SameSiteStrictMode || anon.Path != "/" {
		t.Fatalf("anonymous session cookie %+v: want HttpOnly, SameSite=Strict, Path=/", anon)
	}

	rec := c.login("wrong-token-of-the-right-length")
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "Those credentials are wrong.") {
		t.Fatalf("wrong token: %d\n%s", rec.Code, rec.Body)
	}
	if strings.Contains(c.get("/kinds/webhook").Body.String(), "/actions/") {
		t.Fatal("a failed login shows action forms")
	}

	rec = c.login(testToken)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/" {
		t.Fatalf("login: %d to %q\n%s", rec.Code, rec.Header().Get("Location"), rec.Body)
	}
	auth := c.cookies["jobpipe_dashboard_session"]
	if auth.Value == anon.Value || !auth.HttpOnly || auth.SameSite != http.SameSiteStrictMode {
		t.Fatalf("logged-in cookie %+v: want a new HttpOnly SameSite=Strict session", auth)
	}
	if msg := c.flash(rec); !strings.HasPrefix(msg, "Logged in until ") {
		t.Errorf("flash %q", msg)
	}
	body := c.get("/kinds/webhook").Body.String()
	if !strings.Contains(body, "/kinds/webhook/actions/retry") || !strings.Contains(body, "Log out") {
		t.Fatalf("a logged-in visitor sees no action forms:\n%s", body)
	}

	// The same cookie on a dashboard with another token, or altered, is worth nothing.
	other := newClient(t, f.handler(t, dashboard.Config{Token: testToken + "-rotated"}))
	other.cookies["jobpipe_dashboard_session"] = auth
	if strings.Contains(other.get("/kinds/webhook").Body.String(), "/actions/") {
		t.Error("a session survives a change of token")
	}
	forged := newClient(t, h)
	b, _ := base64.RawURLEncoding.DecodeString(auth.Value)
	b[len(b)-1] ^= 1
	forged.cookies["jobpipe_dashboard_session"] = &http.Cookie{Name: auth.Name, Value: base64.RawURLEncoding.EncodeToString(b)}
	if strings.Contains(forged.get("/kinds/webhook").Body.String(), "/actions/") {
		t.Error("an altered session cookie is accepted")
	}

	rec = c.post("/logout", form("csrf_token", c.csrf("/kinds/webhook")))
	if msg := c.flash(rec); msg != "Logged out." {
		t.Errorf("flash %q", msg)
	}
	if strings.Contains(c.get("/kinds/webhook").Body.String(), "/actions/") {
		t.Error("action forms shown after logging out")
	}
	before := f.snapshot(t)
	if rec := c.post("/kinds/webhook/actions/pause", form("csrf_token", c.csrf("/login"))); rec.Code != http.StatusUnauthorized {
		t.Errorf("POST after logout: %d, want 401", rec.Code)
	}
	if f.snapshot(t) != before {
		t.Error("the database changed")
	}
}

// Every POST is checked for CSRF: a missing, wrong or foreign token, and a cross-origin request,
// are refused with 403 and change nothing.
func TestCSRF(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := f.handler(t, withBoth)
	c, csrf := loggedIn(t, h)
	other, otherCSRF := loggedIn(t, h)
	_ = other
	anonCSRF := newClient(t, h).csrf("/login")
	pause := "/kinds/webhook/actions/pause"

	for _, tc := range []struct {
		name   string
		form   []string
		header []string
		want   string
	}{
		{"no token", nil, nil, "the form has no CSRF token"},
		{"empty token", []string{"csrf_token", ""}, nil, "the form has no CSRF token"},
		{"wrong token", []string{"csrf_token", "bm90IHRoZSB0b2tlbg"}, nil, "does not match this session"},
		{"token of another session", []string{"csrf_token", otherCSRF}, nil, "does not match this session"},
		{"token of the session before login", []string{"csrf_token", anonCSRF}, nil, "does not match this session"},
		{"cross-site fetch", []string{"csrf_token", csrf}, []string{"Sec-Fetch-Site", "cross-site"}, "cross-origin request"},
		{"same-site but other origin", []string{"csrf_token", csrf}, []string{"Sec-Fetch-Site", "same-site"}, "cross-origin request"},
		{"foreign Origin", []string{"csrf_token", csrf}, []string{"Origin", "https://evil.example"}, "cross-origin request"},
		{"foreign Origin with a bearer token", nil, []string{"Origin", "https://evil.example", "Authorization", "Bearer " + testToken}, "cross-origin request"},
		{"basic auth without token", nil, []string{"Authorization", basic(testUser, testPassword)}, "the form has no CSRF token"},
		{"basic auth with the session's token", []string{"csrf_token", csrf}, []string{"Authorization", basic(testUser, testPassword)}, "does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.snapshot(t)
			rec := c.post(pause, form(tc.form...), tc.header...)
			if rec.Code != http.StatusForbidden || !strings.Contains(errorMessage(rec), tc.want) {
				t.Fatalf("status %d, want 403 saying %q:\n%s", rec.Code, tc.want, errorMessage(rec))
			}
			if after := f.snapshot(t); after != before {
				t.Errorf("the database changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	// The same request from the dashboard's own origin passes.
	rec := c.post(pause, form("csrf_token", csrf), "Origin", "http://127.0.0.1:8080", "Sec-Fetch-Site", "same-origin")
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("same-origin POST: %d\n%s", rec.Code, rec.Body)
	}
	if got := f.limitRows(t); !slices.Equal(got, []string{"webhook max_running=NULL key_limit=NULL paused=true"}) {
		t.Errorf("limits %q", got)
	}
}

// A read-only dashboard shows no action forms and refuses every change with 403, whatever the
// credentials.
func TestReadOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := f.handler(t, dashboard.Config{Token: testToken, ReadOnly: true})
	c := newClient(t, h)
	for _, path := range []string{"/", "/kinds/webhook", fmt.Sprintf("/kinds/webhook/jobs/%d", f.ids["failed"])} {
		rec := c.get(path, "Authorization", "Bearer "+testToken)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, rec.Code)
		}
		body := rec.Body.String()
		if strings.Contains(body, "/actions/") || !strings.Contains(body, "read-only") {
			t.Errorf("GET %s shows action forms, or does not say read-only:\n%s", path, body)
		}
	}
	before := f.snapshot(t)
	for _, action := range []string{"retry", "pause", "set-max-running"} {
		rec := c.post("/kinds/webhook/actions/"+action, form("id", fmt.Sprint(f.ids["failed"]), "value", "3"),
			"Authorization", "Bearer "+testToken)
		if rec.Code != http.StatusForbidden || !strings.Contains(errorMessage(rec), "read-only") {
			t.Errorf("POST %s: %d, want 403 read-only:\n%s", action, rec.Code, errorMessage(rec))
		}
	}
	if f.snapshot(t) != before {
		t.Error("the database changed")
	}
}

// With no credentials anyone may change things, but only through a loopback host name (against DNS
// rebinding), and still with CSRF tokens.
func TestOpenDashboardAnswersLoopbackOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := f.handler(t, dashboard.Config{})
	c := newClient(t, h)
	for _, host := range []string{"evil.example", "evil.example:8080", "192.168.1.10:8080", "localhost.evil.example"} {
		c.host = host
		if rec := c.get("/"); rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "loopback") {
			t.Errorf("Host %s: %d, want 403:\n%s", host, rec.Code, rec.Body)
		}
	}
	for _, host := range []string{"localhost:8080", "[::1]:8080", "127.0.0.1"} {
		c.host = host
		if rec := c.get("/"); rec.Code != http.StatusOK {
			t.Errorf("Host %s: %d, want 200", host, rec.Code)
		}
	}
	c.host = "127.0.0.1:8080"
	before := f.snapshot(t)
	if rec := c.post("/kinds/webhook/actions/pause", nil); rec.Code != http.StatusForbidden {
		t.Errorf("POST without CSRF token: %d, want 403", rec.Code)
	}
	if f.snapshot(t) != before {
		t.Error("the database changed")
	}
	rec := c.post("/kinds/webhook/actions/pause", form("csrf_token", c.csrf("/kinds/webhook")))
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("POST with CSRF token: %d\n%s", rec.Code, rec.Body)
	}
	if got := f.limitRows(t); !slices.Equal(got, []string{"webhook max_running=NULL key_limit=NULL paused=true"}) {
		t.Errorf("limits %q", got)
	}
}

// RequireAuthForReads sends anonymous visitors to the login page and refuses the JSON endpoint.
func TestRequireAuthForReads(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := f.handler(t, dashboard.Config{Token: testToken, RequireAuthForReads: true})
	c := newClient(t, h)
	rec := c.get("/kinds/webhook?state=failed")
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/login?next=%2Fkinds%2Fwebhook%3Fstate%3Dfailed" {
		t.Fatalf("anonymous GET: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	if rec := c.get("/api/summary"); rec.Code != http.StatusUnauthorized {
		t.Errorf("anonymous GET /api/summary: %d, want 401", rec.Code)
	}
	if rec := c.get("/api/summary", "Authorization", "Bearer "+testToken); rec.Code != http.StatusOK {
		t.Errorf("GET /api/summary with the token: %d, want 200", rec.Code)
	}
	// Logging in returns to the page asked for.
	csrf := c.csrf("/login?next=%2Fkinds%2Fwebhook%3Fstate%3Dfailed")
	rec = c.post("/login", form("csrf_token", csrf, "token", testToken, "next", "/kinds/webhook?state=failed"))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/kinds/webhook?state=failed" {
		t.Fatalf("login: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	if rec := c.get("/kinds/webhook?state=failed"); rec.Code != http.StatusOK {
		t.Errorf("GET after login: %d", rec.Code)
	}
}

// The login's next parameter never leads away from the dashboard.
func TestLoginRedirectStaysLocal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := f.handler(t, withToken)
	for _, next := range []string{"https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:alert(1)", "kinds/webhook", ""} {
		c := newClient(t, h)
		csrf := c.csrf("/login")
		rec := c.post("/login", form("csrf_token", csrf, "token", testToken, "next", next))
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/" {
			t.Errorf("next %q: %d to %q, want / ", next, rec.Code, rec.Header().Get("Location"))
		}
	}
}

// RequireAuth lets through what the dashboard's credentials authenticate (token, basic auth, a
// logged-in session) and answers anything else with 401 and the challenge; with no credentials
// configured it refuses every request.
func TestRequireAuth(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	behind := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "behind") })
	mount := func(h *dashboard.Handler) http.Handler {
		mux := http.NewServeMux()
		mux.Handle("/", h)
		mux.Handle("GET /metrics", h.RequireAuth(behind))
		return mux
	}
	mux := mount(f.handler(t, withBoth))
	for _, tc := range []struct {
		name   string
		header []string
		want   int
	}{
		{"no credentials", nil, http.StatusUnauthorized},
		{"wrong token", []string{"Authorization", "Bearer " + testToken + "x"}, http.StatusUnauthorized},
		{"wrong password", []string{"Authorization", basic(testUser, testPassword+"x")}, http.StatusUnauthorized},
		{"token", []string{"Authorization", "Bearer " + testToken}, http.StatusOK},
		{"basic auth", []string{"Authorization", basic(testUser, testPassword)}, http.StatusOK},
	} {
		rec := newClient(t, mux).get("/metrics", tc.header...)
		if rec.Code != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, rec.Code, tc.want)
		}
		if rec.Code == http.StatusOK && rec.Body.String() != "behind" {
			t.Errorf("%s: body %q, want the wrapped handler's", tc.name, rec.Body)
		}
		if rec.Code == http.StatusUnauthorized && rec.Header().Get("WWW-Authenticate") != `Basic realm="jobpipe dashboard", charset="UTF-8"` {
			t.Errorf("%s: WWW-Authenticate %q", tc.name, rec.Header().Get("WWW-Authenticate"))
		}
	}
	c, _ := loggedIn(t, mux)
	if rec := c.get("/metrics"); rec.Code != http.StatusOK {
		t.Errorf("logged-in session: status %d, want 200", rec.Code)
	}
	// A dashboard open on loopback has no credentials to check.
	if rec := newClient(t, mount(f.handler(t, dashboard.Config{}))).get("/metrics"); rec.Code != http.StatusUnauthorized ||
		rec.Header().Get("WWW-Authenticate") != `Bearer realm="jobpipe dashboard"` {
		t.Errorf("no credentials configured: status %d, WWW-Authenticate %q; want 401 and the bearer challenge",
			rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
}
