package dashboard_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browserTimeout bounds the whole browser session. It is generous: under -race on a loaded machine
// with two cores, starting Chromium alone can take tens of seconds.
const browserTimeout = 4 * time.Minute

// stepTimeout bounds one wait for the page: a navigation and the condition that shows it is done.
const stepTimeout = 90 * time.Second

// The dashboard driven in headless Chromium: the overview's counts (and their live refresh), the
// login form, filtering the failed jobs, retrying one and changing a limit through the forms, each
// checked against the database. Screenshots of the overview and the kind page are kept.
func TestBrowser(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := httptest.NewServer(f.handler(t, withToken))
	t.Cleanup(srv.Close) // after the browser has gone (cleanups run last first)
	b := startBrowser(t)
	jobsBefore := f.jobRows(t, "webhook")

	// The overview, with every count of the fixture.
	b.do("load the overview", chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#summary tr[data-kind="webhook"]`)))
	counts := b.eval("read the counts", `Array.from(document.querySelectorAll('#summary tr[data-kind="webhook"] [data-field]'))
		.map(c => c.dataset.field + "=" + c.textContent).join(" ")`)
	if want := "waiting=2 due=1 running=1 / ∞ processed=1 failed=1"; !strings.HasPrefix(counts, want) {
		t.Fatalf("webhook's counts %q, want them to start with %q", counts, want)
	}
	// A job failing now shows up without a reload: the page's script polls /api/summary.
	late := f.insert(t, `INSERT INTO webhook (customer_id, url, failed_at, last_error) VALUES (9, 'https://example.com/late', now(), 'timeout') RETURNING id`)
	b.waitFor("the live refresh shows 2 failed jobs",
		`document.querySelector('#summary tr[data-kind="webhook"] [data-field="failed"]').textContent === "2"`)
	b.screenshot("overview")

	// Log in with the token through the form.
	b.do("open the login form", chromedp.Navigate(srv.URL+"/login"), chromedp.WaitVisible(chromedp.CSS("#token")))
	b.do("log in", chromedp.SendKeys(chromedp.CSS("#token"), testToken), chromedp.Click(chromedp.CSS(`#login-form button[type="submit"]`)))
	b.waitFor("the overview after logging in", `location.pathname === "/" && document.querySelector("#flash") !== null &&
		document.querySelector("#flash").textContent.startsWith("Logged in until")`)

	// Open the kind and filter its failed jobs.
	b.do("open webhook", chromedp.Click(chromedp.CSS(`#summary a[href="/kinds/webhook"]`)))
	b.waitFor("the kind page", `location.pathname === "/kinds/webhook" && document.querySelector("#filter-state") !== null`)
	b.do("filter the failed jobs", chromedp.SetValue(chromedp.CSS("#filter-state"), "failed"), chromedp.Click(chromedp.CSS("#filter-submit")))
	b.waitFor("the filtered list", `new URLSearchParams(location.search).get("state") === "failed" && document.readyState === "complete"`)
	if got := b.eval("list the rows", rowsJS); got != fmt.Sprintf("%d failed,%d failed", late, f.ids["failed"]) {
		t.Fatalf("rows of the failed filter: %q", got)
	}

	// Retry the fixture's failed job with its row's button.
	b.do("retry a job", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#jobs tr[data-id="%d"] button[data-action="retry"]`, f.ids["failed"]))))
	b.waitFor("the retry's outcome", `document.querySelector("#flash") !== null`)
	if got, want := b.eval("read the flash", `document.querySelector("#flash").textContent`),
		fmt.Sprintf("Retried 1 job (#%d): now waiting, due at once.", f.ids["failed"]); got != want {
		t.Fatalf("flash %q, want %q", got, want)
	}
	if got := b.eval("list the rows", rowsJS); got != fmt.Sprintf("%d failed", late) {
		t.Errorf("rows of the failed filter after the retry: %q", got)
	}

	// Set the kind's total limit.
	b.do("set the total limit", chromedp.SendKeys(chromedp.CSS("#max-running-value"), "3"), chromedp.Click(chromedp.CSS("#max-running-set")))
	b.waitFor("the limit's outcome", `document.querySelector("#flash") !== null &&
		document.querySelector("#flash").textContent === "Set the total limit of webhook to 3." &&
		document.querySelector("#max-running").textContent === "3"`)
	b.screenshot("kind")

	// The retried job's page.
	b.do("open the retried job", chromedp.Navigate(fmt.Sprintf("%s/kinds/webhook/jobs/%d", srv.URL, f.ids["failed"])))
	b.waitFor("the job page", `document.querySelector("#job-state") !== null && document.querySelector("#job-state").textContent === "waiting"`)
	b.screenshot("job")

	// The database changed exactly so: the retried job waits, the limit is stored, nothing else moved.
	jobsBefore[late] = f.jobRows(t, "webhook")[late]
	if got := changedIDs(jobsBefore, f.jobRows(t, "webhook")); !slices.Equal(got, []int64{f.ids["failed"]}) {
		t.Errorf("changed jobs %v, want only %d", got, f.ids["failed"])
	}
	want := []string{}
	for _, name := range []string{"waiting", "scheduled", "running", "processed", "failed"} {
		state := map[string]string{"scheduled": "waiting", "failed": "waiting"}[name]
		if state == "" {
			state = name
		}
		want = append(want, fmt.Sprintf("%d %s", f.ids[name], state))
	}
	want = append(want, fmt.Sprintf("%d failed", late))
	if got := f.states(t, "webhook"); !slices.Equal(got, want) {
		t.Errorf("states %q, want %q", got, want)
	}
	if got := f.limitRows(t); !slices.Equal(got, []string{"webhook max_running=3 key_limit=NULL paused=false"}) {
		t.Errorf("limits %q", got)
	}
}

// rowsJS lists the job rows on a kind page as "id state".
const rowsJS = `Array.from(document.querySelectorAll("#jobs tbody tr[data-id]")).map(r => r.dataset.id + " " + r.dataset.state).join(",")`

// browser is one headless Chromium with one tab.
type browser struct {
	t      *testing.T
	ctx    context.Context
	output *syncBuffer
	stamp  string
}

// startBrowser starts Debian's chromium (or $JOBPIPE_CHROMIUM) headless with a fresh profile. The
// browser is closed, and its process waited for, when the test ends.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := chromiumPath()
	if err != nil {
		t.Fatal(err)
	}
	profile := t.TempDir() // removed after the browser has exited: cleanups run last first
	output := &syncBuffer{}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// Without these Chromium talks to Google's services at start, and where it cannot, its own
		// connections (the pages') are refused too.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(output),
	)
	t.Cleanup(cancelAlloc)
	logs := &testLog{t: t}
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(logs.Logf))
	t.Cleanup(func() {
		// Close the browser gracefully and wait for its process; cancel kills what is left.
		done, stop := context.WithTimeout(ctx, 30*time.Second)
		defer stop()
		if err := chromedp.Cancel(done); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("closing chromium: %v", err)
		}
		cancel()
		logs.stop()
		if t.Failed() {
			t.Logf("chromium's output:\n%s", output.String())
		}
	})
	deadline, cancelDeadline := context.WithTimeout(ctx, browserTimeout)
	t.Cleanup(cancelDeadline)
	b := &browser{t: t, ctx: deadline, output: output, stamp: time.Now().Format("20060102-150405")}
	// Start the browser now, so that a slow start has its own error. The first run must get the
	// tab's own context (the browser lives as long as that run's context), so the start is bounded
	// by cancelling the tab.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err = <-started:
	case <-time.After(stepTimeout):
		cancel()
		err = <-started
		err = fmt.Errorf("no answer after %v (%w)", stepTimeout, err)
	}
	if err != nil {
		t.Fatalf("starting %s: %v\nits output:\n%s", path, err, output.String())
	}
	return b
}

// chromiumPath finds the browser: $JOBPIPE_CHROMIUM, else chromium on the PATH. Its absence fails
// the test: a missing browser must not pass as a skipped test.
func chromiumPath() (string, error) {
	if p := os.Getenv("JOBPIPE_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("JOBPIPE_CHROMIUM=%s: %v; point it at a Chromium or Chrome binary", p, err)
		}
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("the browser test needs Chromium, and none is installed: " +
		"run `apt-get install chromium` (as root; .ci/chromium.sh does it), " +
		"or set JOBPIPE_CHROMIUM=/path/to/chromium")
}

// do runs the steps within stepTimeout, failing the test with what was being done.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// waitFor waits until the JavaScript condition holds on the page. A click that submits a form
// starts a navigation: until the new page is there, the condition is evaluated on the old page (and
// is false there) or fails because the page went away, so both mean "not yet".
func (b *browser) waitFor(what, condition string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	var lastErr error
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.readyState === "complete" && Boolean(`+condition+`)`))
		if err == nil && ok {
			return
		}
		lastErr = err
		select {
		case <-ctx.Done():
			page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			b.t.Fatalf("browser: waiting for %s: not after %v (last error: %v)\nthe page: %s", what, stepTimeout, lastErr, page)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// eval returns the string the expression gives on the page.
func (b *browser) eval(what, expression string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expression))
	if err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
	return s
}

// screenshot saves a full-page PNG where it outlives the test (see artifactsDir) and logs its path.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	// A page still laying out can refuse ("Cannot take screenshot with 0 width"): try again.
	var png []byte
	var err error
	for {
		if png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			b.t.Fatalf("browser: screenshot %s: %v", name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	dir, err := artifactsDir()
	if err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("dashboard-%s-%s.png", b.stamp, name))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatalf("saving the screenshot: %v", err)
	}
	b.t.Logf("screenshot of the %s page: %s", name, path)
}

// artifactsDir is where tests keep files for people to look at after the run:
// $JOBPIPE_ARTIFACTS_DIR, else jobpipe-artifacts in the system's temporary directory.
func artifactsDir() (string, error) {
	dir := os.Getenv("JOBPIPE_ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "jobpipe-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the artifacts directory %s: %w (set JOBPIPE_ARTIFACTS_DIR to another)", dir, err)
	}
	return dir, nil
}

// syncBuffer collects the browser's output, written from chromedp's goroutine.
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

// testLog passes chromedp's error logs to the test until stop: logging after a test ends panics.
type testLog struct {
	mu      sync.Mutex
	t       *testing.T
	stopped bool
}

func (l *testLog) Logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.t.Logf("chromedp: "+format, args...)
	}
}

func (l *testLog) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
}
