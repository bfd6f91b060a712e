package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a command writing while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs "jobpipe serve" on a free loopback port with vars as its environment and returns
// the server's base URL, and a function that stops it and returns its exit code and output.
func startServe(t *testing.T, url string, vars map[string]string, args ...string) (base string, stop func() (int, string, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	e := &env{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] }, Now: time.Now}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, e, append([]string{"serve", "--addr", "127.0.0.1:0", "--database-url", url}, args...))
	}()
	started := regexp.MustCompile(`dashboard on (http://127\.0\.0\.1:\d+)/`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := started.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("serve exited %d before listening: %s%s", code, out.String(), errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve did not start in 10 s: %s%s", out.String(), errOut.String())
		}
	}
	stopped := false
	var code int
	stop = func() (int, string, string) {
		if !stopped {
			stopped = true
			cancel()
			code = <-done
		}
		return code, out.String(), errOut.String()
	}
	t.Cleanup(func() { stop() })
	return base, stop
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// gaugeLines are the lines of the three kind gauges in a scrape, in its order.
func gaugeLines(body string) []string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "jobpipe_running_jobs{") || strings.HasPrefix(line, "jobpipe_max_running_jobs{") ||
			strings.HasPrefix(line, "jobpipe_remaining_work_count{") {
			out = append(out, line)
		}
	}
	return out
}

func TestServeMetricsAndDashboard(t *testing.T) {
	t.Parallel()
	s := setupJobs(t)
	const token = "0123456789abcdef-serve-test"
	base, stop := startServe(t, s.URL, map[string]string{"JOBPIPE_DASHBOARD_TOKEN": token})

	code, body := get(t, base+"/metrics")
	assertRows(t, "gauges", gaugeLines(body), []string{
		`jobpipe_max_running_jobs{kind="mail"} +Inf`,
		`jobpipe_max_running_jobs{kind="webhook"} +Inf`,
		`jobpipe_remaining_work_count{kind="mail"} 0`,
		`jobpipe_remaining_work_count{kind="webhook"} 3`,
		`jobpipe_running_jobs{kind="mail"} 0`,
		`jobpipe_running_jobs{kind="webhook"} 1`,
	})
	if code != http.StatusOK || !strings.Contains(body, "go_goroutines ") {
		t.Errorf("GET /metrics: status %d; want 200 with the Go runtime's metrics too", code)
	}
	// Limits changed meanwhile show at the next scrape.
	jp(t, s, "limit", "set", "webhook", "5")
	jp(t, s, "pause", "mail")
	_, body = get(t, base+"/metrics")
	assertRows(t, "gauges after limit set and pause", gaugeLines(body)[:2], []string{
		`jobpipe_max_running_jobs{kind="mail"} 0`,
		`jobpipe_max_running_jobs{kind="webhook"} 5`,
	})

	code, body = get(t, base+"/")
	if code != http.StatusOK || !strings.Contains(body, "webhook") || !strings.Contains(body, "mail") {
		t.Errorf("GET /: status %d; want 200 naming both kinds, got:\n%s", code, body)
	}
	// Actions need the token: a POST without it changes nothing.
	resp, err := http.Post(base+"/kinds/webhook/actions/retry", "application/x-www-form-urlencoded", strings.NewReader("ids=5"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST retry without credentials: status %d; want 401 or 403", resp.StatusCode)
	}
	assertRows(t, "after a refused POST", jobRows(t, s, "webhook"), initialWebhooks)

	code, stdout, _ := stop()
	if code != 0 || !regexp.MustCompile(`^jobpipe serve: dashboard on http://127\.0\.0\.1:\d+/, metrics on http://127\.0\.0\.1:\d+/metrics \(actions need credentials\)\njobpipe serve: stopped\n$`).MatchString(stdout) {
		t.Errorf("serve: exit %d, stdout %q", code, stdout)
	}
}

func TestServeRefusesUnsafeSettings(t *testing.T) {
	t.Parallel()
	s := setupJobs(t)
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		want string // in stderr
		code int
	}{
		{name: "open on every interface", args: []string{"--addr", ":0"}, code: 1,
			want: "dashboard: invalid configuration: the dashboard would let anyone change jobs on :0 (every interface)"},
		{name: "short token", vars: map[string]string{"JOBPIPE_DASHBOARD_TOKEN": "short"}, args: []string{"--addr", "127.0.0.1:0"}, code: 1,
			want: "Token has 5 characters, want at least 16"},
		{name: "basic auth without colon", vars: map[string]string{"JOBPIPE_DASHBOARD_BASIC_AUTH": "admin"}, args: []string{"--addr", "127.0.0.1:0"}, code: 1,
			want: "jobpipe: JOBPIPE_DASHBOARD_BASIC_AUTH has no ':': write it as USER:PASSWORD\n"},
		{name: "bad address", args: []string{"--addr", "localhost", "--read-only"}, code: 1, want: "listening on localhost: "},
		{name: "argument", args: []string{"now"}, code: 2, want: "jobpipe serve: unexpected argument \"now\": serve takes flags only\n"},
		{name: "unknown flag", args: []string{"--port", "80"}, code: 2, want: "jobpipe serve: flag provided but not defined: -port\n"},
	} {
		vars := tc.vars
		if vars == nil {
			vars = map[string]string{}
		}
		code, stdout, stderr := runWith(t, vars, time.Now(), append([]string{"serve", "--database-url", s.URL}, tc.args...)...)
		if code != tc.code || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.name, code, stdout, stderr, tc.code, tc.want)
		}
	}
}

// getWith is get with an Authorization header ("" for none); it returns the status, the challenge
// and the body.
func getWith(t *testing.T, url, authorization string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(body)
}

// --auth-reads keeps /metrics open, and says so; --auth-metrics protects it with the dashboard's
// credentials, a bearer token or basic auth.
func TestServeAuthMetrics(t *testing.T) {
	t.Parallel()
	s := setupJobs(t)
	const token = "0123456789abcdef-serve-test"
	const password = "fedcba9876543210-serve-test"
	vars := map[string]string{"JOBPIPE_DASHBOARD_TOKEN": token, "JOBPIPE_DASHBOARD_BASIC_AUTH": "ops:" + password}
	const webhookGauge = `jobpipe_remaining_work_count{kind="webhook"} 3`
	startLine := func(access string) *regexp.Regexp {
		return regexp.MustCompile(`^jobpipe serve: dashboard on http://127\.0\.0\.1:\d+/, metrics on http://127\.0\.0\.1:\d+/metrics \(` +
			regexp.QuoteMeta(access) + `\)\njobpipe serve: stopped\n$`)
	}

	// --auth-reads alone: pages need the credentials, /metrics does not.
	base, stop := startServe(t, s.URL, vars, "--auth-reads")
	if code, _, body := getWith(t, base+"/metrics", ""); code != http.StatusOK || !strings.Contains(body, webhookGauge) {
		t.Errorf("GET /metrics with --auth-reads and no credentials: status %d; want 200 with the gauges", code)
	}
	if code, _, _ := getWith(t, base+"/api/summary", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /api/summary with --auth-reads and no credentials: status %d; want 401", code)
	}
	code, stdout, _ := stop()
	if want := startLine("actions need credentials; pages need credentials; metrics open to anyone (--auth-metrics protects them)"); code != 0 || !want.MatchString(stdout) {
		t.Errorf("serve --auth-reads: exit %d, stdout %q", code, stdout)
	}

	// --auth-metrics: /metrics needs the token or basic auth.
	base, stop = startServe(t, s.URL, vars, "--auth-reads", "--auth-metrics")
	for _, tc := range []struct {
		name, authorization string
		status              int
	}{
		{"no credentials", "", http.StatusUnauthorized},
		{"wrong token", "Bearer " + token + "x", http.StatusUnauthorized},
		{"wrong password", basicAuth("ops", password+"x"), http.StatusUnauthorized},
		{"token", "Bearer " + token, http.StatusOK},
		{"basic auth", basicAuth("ops", password), http.StatusOK},
	} {
		code, challenge, body := getWith(t, base+"/metrics", tc.authorization)
		switch {
		case code != tc.status:
			t.Errorf("GET /metrics with %s: status %d, want %d", tc.name, code, tc.status)
		case code == http.StatusOK && !strings.Contains(body, webhookGauge):
			t.Errorf("GET /metrics with %s: no %q in:\n%s", tc.name, webhookGauge, body)
		case code == http.StatusUnauthorized && (challenge != `Basic realm="jobpipe dashboard", charset="UTF-8"` || strings.Contains(body, "jobpipe_")):
			t.Errorf("GET /metrics with %s: challenge %q, body %q; want the basic challenge and no metrics", tc.name, challenge, body)
		}
	}
	code, stdout, _ = stop()
	if want := startLine("actions need credentials; pages and metrics need credentials"); code != 0 || !want.MatchString(stdout) {
		t.Errorf("serve --auth-reads --auth-metrics: exit %d, stdout %q", code, stdout)
	}

	// Without credentials there is nothing to protect /metrics with.
	args := []string{"serve", "--database-url", s.URL, "--addr", "127.0.0.1:0", "--auth-metrics"}
	code, stdout, stderr := runWith(t, map[string]string{}, time.Now(), args...)
	check(t, args, code, stdout, stderr, 1, "",
		"jobpipe: --auth-metrics needs credentials: set JOBPIPE_DASHBOARD_TOKEN or JOBPIPE_DASHBOARD_BASIC_AUTH\n")
}

func basicAuth(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}
