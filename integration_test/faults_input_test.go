package integration_test

// Fault scenario 14, bad input: while a worker process works the keyed kind and a plain kind whose
// data has text, jsonb and interval columns, and healthy jobs of both flow, the test feeds it
// everything wrong a person, a program or an attacker can give: rows whose data does not decode into
// the Go type, unknown kinds, a table that does not match its Go type, hostile identifiers, hostile
// command-line values, payloads of megabytes and invalid cron specs. Each is refused with the error
// the scenario names, or (a malformed row) failed once with the reason, and nothing else changes:
// every healthy job runs exactly once and at the rate it ran before.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
	"github.com/jobpipe/jobpipe/internal/cli"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
	"github.com/jobpipe/jobpipe/schedule"
)

const (
	inputKind = "fault_input"
	// hostileName is the identifier an attacker tries: if it reached SQL unquoted, table y would go.
	hostileName = `x"; DROP TABLE y; --`
)

// badInput is the bad-input scenario's state: what it enqueued, and what it fed and saw refused.
type badInput struct {
	t    *testing.T
	e    *faultkit.World
	kind *jobinfo.Kind[faultkit.InputJob]
	dir  string // for --data @FILE
	// The payloads of megabytes, built before the measured windows.
	hugeJobs []faultkit.InputJob
	hugeFile string
	mu       sync.Mutex
	keyed    []int64 // healthy jobs of the keyed kind
	plain    []int64 // healthy jobs of the plain kind
	huge     []int64 // jobs of the plain kind with payloads of megabytes
	// malformed maps the rows written with SQL that cannot decode to the last error each must get.
	malformed map[int64]string
	refused   int // inputs refused with the expected error
}

// TestFault14BadInput is fault scenario 14 (see the file's comment): before, during and after the bad
// input, the healthy jobs' rates; at the end, every healthy and huge job processed exactly once, every
// malformed row failed once with its reason, every refused input refused with its exact error, and
// nothing written that the test did not enqueue.
func TestFault14BadInput(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	const (
		window     = 5 * time.Second
		tick       = 40 * time.Millisecond // 100 keyed and 25 plain jobs/s: well within what one worker sustains
		keyedBlogs = 200
	)
	began := time.Now()

	// Arranged: one worker of the keyed kind and of the bad-input kind, a canary table y, the
	// payloads of megabytes built; healthy jobs of both kinds flow.
	f, w := arrangeBadInput(t)
	e := f.e
	stop := f.produce(tick, keyedBlogs)
	time.Sleep(2 * time.Second) // warm-up
	b0 := e.Now(t)
	time.Sleep(window)
	b1 := e.Now(t)

	// Injected: everything wrong, one kind of bad input after the other.
	f.feedEverything()
	if d := e.Now(t).Sub(b1); d < window {
		time.Sleep(window - d) // a during window as long as the others
	}
	d1 := e.Now(t)
	time.Sleep(window)
	a1 := e.Now(t)
	stop()

	// What must hold: the worker lived and kept up with the healthy jobs; each healthy and huge job
	// ran once, each malformed row failed once with its reason, each refusal was exact; nothing else
	// written; the audit.
	if state, exited := w.Exited(); exited {
		t.Fatalf("the worker exited while it was fed bad input: %v", state)
	}
	settled := f.waitSettled(60 * time.Second)
	rates, arrivals := f.checkKeptUp(b0, b1, d1, a1)
	healthyLost := f.checkHealthy(faultkit.KeyedKind, "", f.keyed) + f.checkHealthy(inputKind, inputKind, f.plain)
	hugeLost := f.checkHealthy(inputKind, inputKind, f.huge)
	malformedFailed, malformedLost := f.checkMalformed()
	lost := healthyLost + hugeLost + malformedLost
	f.checkNothingElseWritten()
	duplicates := f.duplicates()
	e.CheckConc(t, nil, 1)
	e.CheckOrder(t)
	took, keyedAudit, inputAudit := f.stopAndAudit(w)
	faultkit.ReportFigures(t, "14 bad input",
		"healthy processed", len(f.keyed)+len(f.plain)-healthyLost, "huge processed", len(f.huge)-hugeLost,
		"malformed failed", malformedFailed, "refused inputs", f.refused, "lost", lost, "duplicates", duplicates,
		"keyed jobs/s before", rates[""][0], "during", rates[""][1], "after", rates[""][2],
		"keyed arrivals/s before", arrivals[""][0], "during", arrivals[""][1], "after", arrivals[""][2],
		"plain jobs/s before", rates[inputKind][0], "during", rates[inputKind][1], "after", rates[inputKind][2],
		"plain arrivals/s before", arrivals[inputKind][0], "during", arrivals[inputKind][1], "after", arrivals[inputKind][2],
		"settled after", settled, "audited changes", keyedAudit.Changes+inputAudit,
		"shutdown", took[0], "wall", time.Since(began))
}

// arrangeBadInput makes the scenario's world (a lock node of its own: the keyed kind's throughput is
// measured, and the shared node serves other tests), its kind's table, the payloads of megabytes and
// the canary table y, and starts the worker.
func arrangeBadInput(t *testing.T) (*badInput, *faultkit.Worker) {
	t.Helper()
	ctx := context.Background()
	faultkit.Reserve(t, 1) // the worker; the dispatchers the test makes itself never start
	addrs, clients := faultkit.NodeAddrs(testenv.StartRedisNodes(t, 1))
	e := faultkit.NewWorld(t, 200*time.Millisecond, addrs, clients, "f14:")
	kind, err := faultkit.DefineInputKind(inputKind)
	if err != nil {
		t.Fatal(err)
	}
	f := &badInput{t: t, e: e, kind: kind, dir: t.TempDir(), malformed: map[int64]string{}}
	f.createTable(kind.TableSpec())
	f.prepareHugePayloads()
	for _, stmt := range []string{`CREATE TABLE y (v text)`, `INSERT INTO y VALUES ('still here')`} {
		if _, err := e.DB.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	faultkit.InstallAudit(t, e.DB, e.Schema.Name, faultkit.KeyedKind)
	faultkit.InstallAudit(t, e.DB, e.Schema.Name, inputKind)
	e.InstallOrderCheck(t)

	s := e.WorkerSettings("w1")
	s.SleepMin, s.SleepMax, s.Concurrency = time.Millisecond, 3*time.Millisecond, 8
	s.PollInterval, s.RetryDelay = 200*time.Millisecond, 200*time.Millisecond
	s.InputKind = inputKind
	w := faultkit.StartWorker(t, s)
	faultkit.WaitReady(t, 60*time.Second, w)
	return f, w
}

// feedEverything feeds each kind of bad input in turn, and logs how long each took.
func (f *badInput) feedEverything() {
	f.t.Helper()
	for _, step := range []struct {
		what string
		feed func()
	}{
		{"malformed rows", f.feedMalformedRows}, {"huge payloads", f.feedHugePayloads}, {"unknown kinds", f.feedUnknownKinds},
		{"mismatched tables", f.feedMismatchedTables}, {"hostile identifiers", f.feedHostileIdentifiers},
		{"hostile command-line values", f.feedHostileCLIValues}, {"invalid cron specs", f.feedInvalidCronSpecs},
	} {
		fed := time.Now()
		step.feed()
		f.t.Logf("fed %s in %v", step.what, time.Since(fed).Round(time.Millisecond))
	}
}

// checkKeptUp checks, for each kind, that the worker kept up with what arrived as well during
// [b1, d1) and after [d1, a1) the bad input as before [b0, b1). It returns each kind's rates and
// arrivals in the three windows, by ledger kind.
func (f *badInput) checkKeptUp(b0, b1, d1, a1 time.Time) (rates, arrivals map[string][3]float64) {
	t, e := f.t, f.e
	t.Helper()
	rates, arrivals = map[string][3]float64{}, map[string][3]float64{}
	for k, table := range map[string]string{"": faultkit.KeyedKind, inputKind: inputKind} {
		rates[k] = [3]float64{faultkit.LedgerRate(t, e.DB, k, b0, b1), faultkit.LedgerRate(t, e.DB, k, b1, d1), faultkit.LedgerRate(t, e.DB, k, d1, a1)}
		arrivals[k] = [3]float64{f.arrivals(table, b0, b1), f.arrivals(table, b1, d1), f.arrivals(table, d1, a1)}
		// The worker keeps up with what arrives as well during and after the bad input as before. The
		// rates alone would also measure the producer, which shares the test process (and its CPU)
		// with the feeding: it enqueues less while the test builds and sends megabytes.
		r, a := rates[k], arrivals[k]
		if kept := [3]float64{r[0] / a[0], r[1] / a[1], r[2] / a[2]}; kept[1] < 0.8*kept[0] || kept[2] < 0.8*kept[0] {
			t.Errorf("kind %q ran %.1f jobs/s before the bad input, %.1f during, %.1f after, as healthy jobs arrived at %.1f, %.1f, %.1f/s: "+
				"it kept up with %.0f%%, %.0f%%, %.0f%% of them; want during and after at least 80%% of before", k, r[0], r[1], r[2], a[0], a[1], a[2],
				100*kept[0], 100*kept[1], 100*kept[2])
		}
	}
	return rates, arrivals
}

// stopAndAudit stops the worker (SIGTERM), checks that it left nothing leased or locked, audits both
// kinds, and checks its stats: the malformed rows failed, nothing retried, lost or stale. It returns
// how long the worker took to stop, and the audited changes.
func (f *badInput) stopAndAudit(w *faultkit.Worker) (took []time.Duration, keyedAudit faultkit.AuditSummary, inputAudit int) {
	t, e := f.t, f.e
	t.Helper()
	took = faultkit.Terminate(t, w)
	e.CheckQuiet(t)
	if n := f.count(`lease_expires_at IS NOT NULL OR lease_owner IS NOT NULL`); n != 0 {
		t.Errorf("%d rows of %s still leased after the worker stopped", n, inputKind)
	}
	keyedAudit = faultkit.CheckAudit(t, e.DB, faultkit.KeyedKind, "")
	inputAudit = f.checkAudit()
	if st := w.Stats(); st == nil || st.Failed != int64(len(f.malformed)) || st.Retried != 0 || st.LeasesLost != 0 || st.StaleFinishes != 0 {
		t.Errorf("worker stats %+v; want %d failed (the malformed rows), nothing retried, lost or stale", st, len(f.malformed))
	}
	return took, keyedAudit, inputAudit
}

// createTable creates a kind's table from its spec in the test's schema.
func (f *badInput) createTable(spec jobinfo.TableSpec) {
	f.t.Helper()
	ddl, err := spec.CreateSQL()
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.e.DB.Exec(context.Background(), ddl); err != nil {
		f.t.Fatal(err)
	}
}

// produce enqueues healthy jobs every tick until the returned stop is called (or the test ends): one
// job of the keyed kind for each of four of the blogs in turn, and one job of the plain kind.
func (f *badInput) produce(tick time.Duration, blogs int64) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for n := int64(0); ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			jobs := make([]faultkit.KeyedJob, 4)
			for i := range jobs {
				jobs[i] = faultkit.KeyedJob{BlogID: 1 + (4*n+int64(i))%blogs, Seq: n}
			}
			res, err := dispatcher.EnqueueMany(context.Background(), f.e.DB, f.e.Kind, jobs)
			if err != nil {
				f.t.Errorf("enqueue healthy keyed jobs: %v", err)
				return
			}
			job, err := dispatcher.Enqueue(context.Background(), f.e.DB, f.kind, faultkit.InputPayload(n, "job "+strconv.FormatInt(n, 10), 2))
			if err != nil {
				f.t.Errorf("enqueue a healthy plain job: %v", err)
				return
			}
			f.mu.Lock()
			for _, r := range res {
				f.keyed = append(f.keyed, r.ID)
			}
			f.plain = append(f.plain, job.ID)
			f.mu.Unlock()
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	f.t.Cleanup(stop) // a test that fails early still stops it before it ends
	return stop
}

// refuse counts an input refused with the error expected of it, and fails t with what was got when
// it was not.
func (f *badInput) refuse(what string, got error, want string) {
	f.t.Helper()
	if got == nil || got.Error() != want {
		f.t.Errorf("%s:\n got error %v\nwant %s", what, got, want)
		return
	}
	f.refused++
}

// jobpipe runs the command line in-process, as cmd/jobpipe does.
func (f *badInput) jobpipe(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = cli.Run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// refuseCLI runs a command line that must be refused: with exit code 1 and exactly want on stderr,
// or with exit code 2 and want as the first line of stderr, followed by the command's usage. Nothing
// may be printed on stdout.
func (f *badInput) refuseCLI(wantCode int, want string, args ...string) {
	f.t.Helper()
	code, stdout, stderr := f.jobpipe(args...)
	ok := code == wantCode && stdout == ""
	switch wantCode {
	case 1:
		ok = ok && stderr == want+"\n"
	case 2:
		ok = ok && strings.HasPrefix(stderr, want+"\n\nusage: jobpipe ")
	}
	if !ok {
		f.t.Errorf("jobpipe %q:\n got exit %d, stdout %q, stderr %q\nwant exit %d, stderr %q", args, code, stdout, stderr, wantCode, want)
		return
	}
	f.refused++
}

// db is the --database-url flag of the test's schema, for command lines.
func (f *badInput) db() []string { return []string{"--database-url", f.e.Schema.URL} }

// count counts the plain kind's rows matching cond.
func (f *badInput) count(cond string) int {
	f.t.Helper()
	var n int
	if err := f.e.DB.QueryRow(context.Background(), "SELECT count(*) FROM "+inputKind+" WHERE "+cond).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// feedMalformedRows writes rows with SQL whose data the Go type refuses: a jsonb value of the wrong
// type for map[string]int, an array where an object belongs, a fraction where an integer belongs, and
// an interval too long for a time.Duration; and one more of the last through the command line. Each
// must fail once with the reason; none may reach the handler or hold up the healthy jobs.
func (f *badInput) feedMalformedRows() {
	const prefix = `the job's data does not decode into its Go type: `
	for _, m := range []struct{ meta, wait, want string }{
		{`{"a": "not a number"}`, "1 second", prefix + `column "meta": json: cannot unmarshal string into Go value of type int`},
		{`[1, 2]`, "1 second", prefix + `column "meta": json: cannot unmarshal array into Go value of type map[string]int`},
		{`{"a": 1.5}`, "1 second", prefix + `column "meta": json: cannot unmarshal number 1.5 into Go value of type int`},
		{`{"a": 1}`, "300 years", prefix + `column "wait": the interval of 3600 months, 0 days and 0 microseconds does not fit a time.Duration (at most about 292 years)`},
	} {
		var id int64
		err := f.e.DB.QueryRow(context.Background(), `INSERT INTO `+inputKind+` (blog_id, seq, body, meta, wait)
			VALUES ($1, -1, 'malformed', $2::jsonb, $3::interval) RETURNING id`, faultkit.InputBlogBase-1, m.meta, m.wait).Scan(&id)
		if err != nil {
			f.t.Fatal(err)
		}
		f.malformed[id] = m.want
	}
	// PostgreSQL reads "300 years" as an interval, so `jobpipe enqueue` writes the row; the Go type
	// cannot hold it, so the job fails like the rows above.
	code, stdout, stderr := f.jobpipe(append([]string{"enqueue", inputKind, "--data",
		`{"blog_id": 999999, "seq": -1, "body": "from the command line", "meta": {"a": 1}, "wait": "300 years"}`}, f.db()...)...)
	var id int64
	if _, err := fmt.Sscanf(stdout, inputKind+": job %d enqueued\n", &id); code != 0 || err != nil || stderr != "" {
		f.t.Fatalf("jobpipe enqueue of an interval of 300 years: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	f.malformed[id] = prefix + `column "wait": the interval of 3600 months, 0 days and 0 microseconds does not fit a time.Duration (at most about 292 years)`
}

// prepareHugePayloads builds the payloads of megabytes feedHugePayloads enqueues, before the
// measured windows, so that building them does not count against the worker's throughput.
func (f *badInput) prepareHugePayloads() {
	body := strings.Repeat("jobpipe ü ", 4<<20/11)
	f.hugeJobs = []faultkit.InputJob{faultkit.InputPayload(1_000_001, body, 0), faultkit.InputPayload(1_000_002, "wide", 100_000)}
	job := faultkit.InputPayload(1_000_003, strings.Repeat("x", 3<<20), 10)
	data, err := json.Marshal(map[string]any{"blog_id": job.BlogID, "seq": job.Seq, "body": job.Body, "meta": job.Meta, "wait": "3 seconds"})
	if err != nil {
		f.t.Fatal(err)
	}
	f.hugeFile = filepath.Join(f.dir, "huge.json")
	if err := os.WriteFile(f.hugeFile, data, 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// feedHugePayloads enqueues payloads of megabytes three ways: a 4 MiB text from Go, a jsonb of 100,000
// members from Go, and a 3 MiB text through `jobpipe enqueue --data @FILE` (admin's JSON path). Each
// must be processed whole (the handler checks the payload against its own account of itself).
func (f *badInput) feedHugePayloads() {
	for _, job := range f.hugeJobs {
		res, err := dispatcher.Enqueue(context.Background(), f.e.DB, f.kind, job)
		if err != nil {
			f.t.Fatalf("enqueue a payload of %d bytes and %d keys: %v", len(job.Body), len(job.Meta), err)
		}
		f.huge = append(f.huge, res.ID)
	}
	code, stdout, stderr := f.jobpipe(append([]string{"enqueue", inputKind, "--data", "@" + f.hugeFile}, f.db()...)...)
	var id int64
	if _, err := fmt.Sscanf(stdout, inputKind+": job %d enqueued\n", &id); code != 0 || err != nil || stderr != "" {
		f.t.Fatalf("jobpipe enqueue --data @%s: exit %d, stdout %q, stderr %q", f.hugeFile, code, stdout, stderr)
	}
	f.huge = append(f.huge, id)
}

// feedUnknownKinds asks for kinds that are not registered, from the command line, from package admin
// and package limits, and from Go with a kind whose table does not exist.
func (f *badInput) feedUnknownKinds() {
	ctx := context.Background()
	const unknown = `limits: unknown kind "nosuch": it is not in jobpipe_kinds; a kind is recorded when a dispatcher registers it (or by jobinfo's Register); ` +
		"`jobpipe kinds` lists the registered ones"
	f.refuseCLI(1, unknownKindCLIError("enqueue", "nosuch"), append([]string{"enqueue", "nosuch", "--data", `{"id": 1}`}, f.db()...)...)
	f.refuseCLI(1, unknownKindCLIError("jobs list", "nosuch"), append([]string{"jobs", "list", "nosuch"}, f.db()...)...)
	f.refuseCLI(1, unknownKindCLIError("jobs retry", "nosuch"), append([]string{"jobs", "retry", "nosuch", "1"}, f.db()...)...)
	f.refuseCLI(1, unknownKindCLIError("limit set", "nosuch"), append([]string{"limit", "set", "nosuch", "3"}, f.db()...)...)
	f.refuseCLI(1, unknownKindCLIError("pause", "nosuch"), append([]string{"pause", "nosuch"}, f.db()...)...)
	_, err := admin.LoadKind(ctx, f.e.DB, "nosuch")
	f.refuse("admin.LoadKind(nosuch)", err, unknown)
	f.refuse("limits.SetMaxRunning(nosuch)", limits.SetMaxRunning(ctx, f.e.DB, "nosuch", 3), unknownKindLimitsError("nosuch"))
	nosuch, err := faultkit.DefineInputKind("fault_nosuch")
	if err != nil {
		f.t.Fatal(err)
	}
	_, err = dispatcher.Enqueue(ctx, f.e.DB, nosuch, faultkit.InputPayload(1, "x", 0))
	f.refuse("dispatcher.Enqueue(fault_nosuch)", err,
		`uniqueness: enqueueing a "fault_nosuch" job: the kind's table "fault_nosuch" does not exist: create it (jobpipe kind new, then jobpipe migrate up) `+
			`and register the kind (a dispatcher does at Start) (ERROR: relation "fault_nosuch" does not exist (SQLSTATE 42P01))`)
}

// unknownKindCLIError is the command line's refusal of an unknown kind by command cmd, when no registered
// kind is close enough to suggest.
func unknownKindCLIError(cmd, kind string) string {
	return fmt.Sprintf("jobpipe %s: unknown kind %q: no kind of that name is registered; a dispatcher registers its kinds when it starts, "+
		"and a migration written by `jobpipe kind new` registers its kind when applied (`jobpipe kinds` lists them)", cmd, kind)
}

// unknownKindLimitsError is package limits' error for an unknown kind.
func unknownKindLimitsError(kind string) string {
	return fmt.Sprintf(`limits: unknown kind %q: it is not in jobpipe_kinds; a kind is registered when a dispatcher starts with it `+
		`or when the migration that creates its table (jobpipe kind new) is applied`, kind)
}

// feedMismatchedTables starts a dispatcher with two kinds of the plain kind's Go type: one whose
// table was written by hand and differs from the type in five ways, one whose table does not exist.
// Start must refuse, listing every mismatch of both, and register neither.
func (f *badInput) feedMismatchedTables() {
	ctx := context.Background()
	cols := []string{`blog_id text NOT NULL`, `body text`, `meta jsonb`, `wait bigint NOT NULL`}
	for _, c := range jobinfo.PipelineColumns {
		switch c.Name {
		case "lock_token":
		case "attempts_made":
			cols = append(cols, "attempts_made bigint NOT NULL DEFAULT 0")
		default:
			cols = append(cols, c.Name+" "+c.DDL)
		}
	}
	if _, err := f.e.DB.Exec(ctx, `CREATE TABLE fault_mismatch (`+strings.Join(cols, ", ")+`)`); err != nil {
		f.t.Fatal(err)
	}
	d, err := dispatcher.New(dispatcher.Config{DB: f.e.DB, NodeName: "mismatch"})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, name := range []string{"fault_mismatch", "fault_nosuch"} {
		k, err := faultkit.DefineInputKind(name)
		if err != nil {
			f.t.Fatal(err)
		}
		if err := dispatcher.Register(d, k, func(context.Context, *dispatcher.Job[faultkit.InputJob]) error { return nil }); err != nil {
			f.t.Fatal(err)
		}
	}
	err = d.Start(ctx)
	if err == nil {
		_ = d.Stop(ctx)
		f.t.Errorf("a dispatcher started with a mismatched table and a missing one")
		return
	}
	got := map[string][]string{}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		f.t.Errorf("Start: %v; want both kinds' mismatches", err)
		return
	}
	for _, kindErr := range joined.Unwrap() {
		var m *jobinfo.MismatchError
		if !errors.As(kindErr, &m) {
			f.t.Errorf("Start: %v is not a *jobinfo.MismatchError", kindErr)
			continue
		}
		got[m.Kind] = m.Problems
	}
	want := map[string][]string{
		"fault_mismatch": {
			`column "blog_id" (field BlogID, Go type int64) has type text: expected int8`,
			`column "seq" (field Seq) is missing: add it as bigint`,
			`column "body" is nullable but field Body (string) cannot hold NULL: make the field a pointer or the column NOT NULL`,
			`pipeline column "attempts_made" has type int8: expected int4`,
			`pipeline column "lock_token" is missing: add it as bigint NOT NULL DEFAULT 0`,
		},
		"fault_nosuch": {
			"table \"fault_nosuch\" does not exist: create it with `jobpipe kind new fault_nosuch ...` or TableSpec.CreateSQL and run the migration",
		},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		f.t.Errorf("Start's mismatches:\n got %q\nwant %q", got, want)
		return
	}
	f.refused += 2
	var registered int
	if err := f.e.DB.QueryRow(ctx, `SELECT count(*) FROM jobpipe_kinds WHERE name IN ('fault_mismatch', 'fault_nosuch')`).Scan(&registered); err != nil || registered != 0 {
		f.t.Errorf("%d of the refused kinds were registered (%v)", registered, err)
	}
}

// feedHostileIdentifiers gives names that are SQL, unicode or too long, wherever a name is taken: a
// kind, a table and a column in Go, `jobpipe kind new`, the command line's kind arguments, a key of
// job data, a schedule's name. Each is refused by name, or (where a name is only looked up) is an
// unknown kind; table y outlives them all.
func (f *badInput) feedHostileIdentifiers() {
	ctx := context.Background()
	allowed := ": use lower-case letters, digits and underscores, starting with a letter or underscore"
	for _, name := range []string{hostileName, "ジョブ", "Jobs"} {
		_, err := faultkit.DefineInputKind(name)
		f.refuse("Define("+name+")", err, fmt.Sprintf(`jobinfo: kind %q: jobinfo: kind name %q is not allowed`+allowed, name, name))
	}
	long := strings.Repeat("k", 64)
	_, err := faultkit.DefineInputKind(long)
	f.refuse("Define(64 bytes)", err, fmt.Sprintf(`jobinfo: kind %q: jobinfo: kind name %q is 64 bytes long: the limit is 48`, long, long))
	_, err = jobinfo.Define[faultkit.InputJob]("fault_table", jobinfo.Table("billing."+hostileName))
	f.refuse("Table(billing."+hostileName+")", err, fmt.Sprintf(`jobinfo: kind "fault_table": jobinfo: table name %q is not allowed`+allowed, hostileName))
	type hostileColumn struct {
		A int64 `jobpipe:"x\"; DROP TABLE y; --"`
	}
	_, err = jobinfo.Define[hostileColumn]("fault_column")
	f.refuse("Define(hostile column)", err, fmt.Sprintf(`jobinfo: kind "fault_column": jobinfo: column name %q is not allowed`+allowed+` (field A)`, hostileName))

	f.refuseCLI(1, "jobpipe: kind new: nothing written:\n"+strings.Join([]string{
		fmt.Sprintf(`jobinfo: kind name %q is not allowed`+allowed, hostileName),
		`jobinfo: table name "ジョブ" is not allowed` + allowed,
		fmt.Sprintf(`jobinfo: column name %q is not allowed`+allowed, `c"; DROP TABLE y; --`),
		`jobinfo: column type "serial" is not supported: use one of ` + strings.Join(jobinfo.ColumnTypes(), ", ") + `, varchar(n), numeric(p,s) (column "ok")`,
	}, "\n"), "kind", "new", hostileName, "--table", "ジョブ", "--field", `c"; DROP TABLE y; --:text`, "--field", "ok:serial")
	for _, name := range []string{hostileName, "ジョブ", long} {
		f.refuseCLI(1, unknownKindCLIError("enqueue", name), append([]string{"enqueue", name, "--data", `{"id": 1}`}, f.db()...)...)
		f.refuseCLI(1, unknownKindCLIError("jobs list", name), append([]string{"jobs", "list", name}, f.db()...)...)
		f.refuseCLI(1, unknownKindCLIError("limit set", name), append([]string{"limit", "set", name, "1"}, f.db()...)...)
	}
	k, err := admin.LoadKind(ctx, f.e.DB, inputKind)
	if err != nil {
		f.t.Fatal(err)
	}
	_, err = admin.Enqueue(ctx, f.e.DB, k, admin.EnqueueRequest{Data: json.RawMessage(`{"x\"; DROP TABLE y; --": 1, "blog_id": 1, "seq": 1, "body": "b", "wait": "1s"}`)})
	f.refuse("admin.Enqueue(hostile column)", err, fmt.Sprintf(`admin: invalid data for kind "fault_input": column %q: not a column of kind "fault_input"; `+
		`its columns are blog_id bigint, seq bigint, body text, meta jsonb, wait interval`, hostileName))
	_, err = schedule.Parse(schedule.Spec{Name: hostileName, Cron: "@daily"})
	f.refuse("schedule.Parse(hostile name)", err, fmt.Sprintf(`schedule: invalid schedule name: jobinfo: schedule name %q is not allowed`+allowed, hostileName))
}

// feedHostileCLIValues gives the command line values it must refuse before it changes anything:
// times, durations, strategies, JSON, states, counts, ids, progress modes, limits and keys.
func (f *badInput) feedHostileCLIValues() {
	data := `{"blog_id": 1, "seq": 1, "body": "b", "wait": "1 second"}`
	enqueue := func(more ...string) []string {
		return append(append([]string{"enqueue", inputKind}, more...), f.db()...)
	}
	for _, c := range []struct {
		code int
		want string
		args []string
	}{
		{2, `jobpipe enqueue: --at "yesterday" is not an RFC 3339 time: write it as 2026-11-21T18:00:00Z or 2026-11-21T19:00:00+01:00`,
			enqueue("--data", data, "--at", "yesterday")},
		{2, `jobpipe enqueue: --in "-5s" is not a duration of 0 or more: write it as 90s, 15m or 2h30m`, enqueue("--data", data, "--in", "-5s")},
		{2, `jobpipe enqueue: --in "1fortnight" is not a duration of 0 or more: write it as 90s, 15m or 2h30m`, enqueue("--data", data, "--in", "1fortnight")},
		{2, `jobpipe enqueue: --at and --in contradict each other: give one`, enqueue("--data", data, "--at", "2026-11-21T18:00:00Z", "--in", "1h")},
		{2, `jobpipe enqueue: --on-duplicate "merge": want skip, replace or error`, enqueue("--data", data, "--on-duplicate", "merge")},
		{2, `jobpipe enqueue: the data in --data is not a JSON object (invalid JSON at byte 2: invalid character 'o' in literal null (expecting 'u')): write it as {"column": value, ...}`,
			enqueue("--data", "not json")},
		{2, `jobpipe enqueue: the data in --data is not a JSON object (it is a JSON array): write it as {"column": value, ...}`, enqueue("--data", "[1, 2]")},
		{1, `jobpipe: admin: invalid data for kind "fault_input": column "extra": not a column of kind "fault_input"; its columns are blog_id bigint, seq bigint, body text, meta jsonb, wait interval; ` +
			`column "blog_id" (bigint): "1" is a string, not an integer; column "seq" (bigint): 1.5 is not an integer; column "body" (text): 7 is a number, not a string; ` +
			`column "wait" (interval): missing: the column is NOT NULL and has no default`,
			enqueue("--data", `{"blog_id": "1", "seq": 1.5, "body": 7, "extra": 1}`)},
		{1, `jobpipe: admin: invalid data for kind "fault_input": column "wait" (interval): "soon" is not an interval PostgreSQL reads (invalid input syntax for type interval: "soon"): ` +
			`write it like "1 hour 30 minutes", "01:30:00" or "PT1H30M"`,
			enqueue("--data", `{"blog_id": 1, "seq": 1, "body": "b", "wait": "soon"}`)},
		{1, `jobpipe: admin: invalid data for kind "fault_input": column "seq" (bigint): 1e999999999 is out of range (-9223372036854775808 to 9223372036854775807)`,
			enqueue("--data", `{"blog_id": 1, "seq": 1e999999999, "body": "b", "wait": "1 second"}`)},
		{1, `jobpipe: admin: invalid data for kind "fault_input": column "meta" (jsonb): {"a":"\u0000"} contains the character \u0000, which jsonb cannot hold`,
			enqueue("--data", `{"blog_id": 1, "seq": 1, "body": "b", "meta": {"a": "\u0000"}, "wait": "1 second"}`)},
		{1, `jobpipe: admin: invalid data for kind "fault_input": column "meta" (jsonb): PostgreSQL refused it: invalid input syntax for type json: Unicode low surrogate must follow a high surrogate`,
			enqueue("--data", `{"blog_id": 1, "seq": 1, "body": "b", "meta": {"a": "\ud800"}, "wait": "1 second"}`)},
		{2, `jobpipe jobs list: --state: admin: invalid state "done": use one of waiting, running, processed, failed`,
			append([]string{"jobs", "list", inputKind, "--state", "done"}, f.db()...)},
		{2, `jobpipe jobs list: --limit 0: give 1 to 1000`, append([]string{"jobs", "list", inputKind, "--limit", "0"}, f.db()...)},
		{2, `jobpipe jobs list: invalid value "0x10" for flag -limit: parse error`, append([]string{"jobs", "list", inputKind, "--limit", "0x10"}, f.db()...)},
		{2, "jobpipe jobs show: job id \"abc\" is not a job id: give whole numbers of 1 or more, as `jobpipe jobs list` shows them",
			append([]string{"jobs", "show", inputKind, "abc"}, f.db()...)},
		{2, "jobpipe jobs discard: job id \"99999999999999999999\" is not a job id: give whole numbers of 1 or more, as `jobpipe jobs list` shows them",
			append([]string{"jobs", "discard", inputKind, "1", "99999999999999999999"}, f.db()...)},
		{2, "jobpipe jobs retry: job id \"0\" is not a job id: give whole numbers of 1 or more, as `jobpipe jobs list` shows them",
			append([]string{"jobs", "retry", inputKind, "0"}, f.db()...)},
		{2, `jobpipe jobs retry: --progress "maybe": want auto, always or never`,
			append([]string{"jobs", "retry", inputKind, "--all-failed", "--progress", "maybe"}, f.db()...)},
		{2, `jobpipe limit set: N -1 is negative: give 0 (halt) to 2147483647`, append([]string{"limit", "set", inputKind, "-1"}, f.db()...)},
		{2, `jobpipe limit set: N "1e9" is not a whole number: give 0 (halt) to 2147483647`, append([]string{"limit", "set", inputKind, "1e9"}, f.db()...)},
		{1, `jobpipe: limits: invalid key "x" for kind "fault_input": the kind has no key, so it has no per-key limits`,
			append([]string{"pause", inputKind, "--key", "x"}, f.db()...)},
		{2, `jobpipe enqueue: want one KIND, got 0 arguments`, append([]string{"enqueue", "--data", data}, f.db()...)},
	} {
		f.refuseCLI(c.code, c.want, c.args...)
	}
	code, _, stderr := f.jobpipe(`x"; DROP TABLE y; --`)
	if want := "jobpipe: unknown command \"x\\\"; DROP TABLE y; --\"\n\nusage: jobpipe "; code != 2 || !strings.HasPrefix(stderr, want) {
		f.t.Errorf("jobpipe with a hostile command: exit %d, %q", code, stderr)
	} else {
		f.refused++
	}
}

// feedInvalidCronSpecs gives invalid specs to schedule.Parse and to a dispatcher's AddSchedule, which
// must refuse each, naming the spec and saying how to write one, and store nothing.
func (f *badInput) feedInvalidCronSpecs() {
	const help = `write 5 fields "minute hour day-of-month month day-of-week" (e.g. "30 3 * * *" for 03:30 every day), ` +
		`6 with seconds first (e.g. "*/10 * * * * *" for every 10 seconds), or a descriptor (e.g. "@daily", "@every 15m")`
	d, err := dispatcher.New(dispatcher.Config{DB: f.e.DB, NodeName: "cron"})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := dispatcher.Register(d, f.kind, func(context.Context, *dispatcher.Job[faultkit.InputJob]) error { return nil }); err != nil {
		f.t.Fatal(err)
	}
	for _, c := range []struct {
		spec schedule.Spec
		want string
	}{
		{schedule.Spec{Name: "nightly", Cron: "61 * * * *"}, `schedule: invalid cron spec "61 * * * *" of schedule "nightly": end of range (61) above maximum (59): 61; ` + help},
		{schedule.Spec{Name: "nightly", Cron: "* * *"}, `schedule: invalid cron spec "* * *" of schedule "nightly": expected 5 to 6 fields, found 3: [* * *]; ` + help},
		{schedule.Spec{Name: "nightly", Cron: "0 0 30 2 *"}, `schedule: invalid cron spec "0 0 30 2 *" of schedule "nightly": it matches no time in the next five years (is it a date that does not exist, such as February 30?); ` + help},
		{schedule.Spec{Name: "tick", Cron: "@every 500ms"}, `schedule: invalid cron spec "@every 500ms" of schedule "tick": @every 500ms: give whole seconds, at least 1s; ` + help},
		{schedule.Spec{Name: "zones", Cron: "TZ=UTC CRON_TZ=UTC"}, `schedule: invalid cron spec "TZ=UTC CRON_TZ=UTC" of schedule "zones": it gives a time zone twice: give one CRON_TZ= prefix, or the zone alone; ` + help},
		{schedule.Spec{Name: "mars", Cron: "@daily", TimeZone: "Mars/Olympus"}, `schedule: invalid time zone "Mars/Olympus" of schedule "mars": unknown: give an IANA name such as "Europe/Berlin" or "America/New_York", or "UTC" (unknown time zone Mars/Olympus)`},
	} {
		_, err := schedule.Parse(c.spec)
		f.refuse(fmt.Sprintf("schedule.Parse(%+v)", c.spec), err, c.want)
		err = dispatcher.AddSchedule(d, f.kind, c.spec, faultkit.InputPayload(1, "x", 0))
		if !errors.Is(err, schedule.ErrInvalid) || err.Error() != "dispatcher: AddSchedule: "+c.want {
			f.t.Errorf("AddSchedule(%+v): %v; want dispatcher: AddSchedule: %s", c.spec, err, c.want)
		} else {
			f.refused++
		}
	}
	var stored int
	if err := f.e.DB.QueryRow(context.Background(), `SELECT count(*) FROM jobpipe_schedules`).Scan(&stored); err != nil || stored != 0 {
		f.t.Errorf("%d schedules stored (%v); want none", stored, err)
	}
}

// arrivals is how many healthy jobs per second were enqueued into table in [from, to), on the
// database's clock: the load the rates are measured under.
func (f *badInput) arrivals(table string, from, to time.Time) float64 {
	f.t.Helper()
	var n int
	if err := f.e.DB.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()+`
		WHERE created_at >= $1 AND created_at < $2 AND seq >= 0 AND seq < 1000000`, from, to).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return float64(n) / to.Sub(from).Seconds()
}

// waitSettled waits until every job the test enqueued has finished: the healthy and huge ones
// processed, the malformed ones failed. It returns how long that took.
func (f *badInput) waitSettled(within time.Duration) time.Duration {
	f.t.Helper()
	start := time.Now()
	faultkit.WaitFor(f.t, "every job finished", within, func() bool {
		return f.e.Count(f.t, "processed_at IS NULL AND failed_at IS NULL") == 0 && f.count("processed_at IS NULL AND failed_at IS NULL") == 0
	})
	return time.Since(start)
}

// checkHealthy checks that each of ids (jobs of table, whose ledger rows have kind ledgerKind) ran
// once, on its first attempt, ended ok and was processed. It returns how many were not: lost.
func (f *badInput) checkHealthy(table, ledgerKind string, ids []int64) int {
	f.t.Helper()
	var lk any
	if ledgerKind != "" {
		lk = ledgerKind
	}
	rows, err := f.e.DB.Query(context.Background(), `SELECT t.id, t.attempts_made, t.processed_at IS NOT NULL, t.failed_at IS NOT NULL,
		coalesce(t.last_error, ''), count(l.n), count(l.n) FILTER (WHERE l.outcome = 'ok' AND l.attempt = 1)
		FROM `+pgx.Identifier{table}.Sanitize()+` t LEFT JOIN mp_ledger l ON l.job_id = t.id AND l.kind IS NOT DISTINCT FROM $2
		WHERE t.id = ANY($1) GROUP BY t.id`, ids, lk)
	if err != nil {
		f.t.Fatal(err)
	}
	type state struct {
		ID                int64
		Attempts          int
		Processed, Failed bool
		LastError         string
		Calls, OK         int
	}
	states, err := pgx.CollectRows(rows, pgx.RowToStructByPos[state])
	if err != nil {
		f.t.Fatal(err)
	}
	report := faultkit.NewFailureLog(f.t, table+": exactly once")
	defer report.Done()
	lost := len(ids) - len(states)
	if lost != 0 {
		report.Errorf("%s: %d of %d enqueued jobs have no row", table, lost, len(ids))
	}
	for _, s := range states {
		if !s.Processed || s.Failed || s.Attempts != 1 || s.LastError != "" || s.Calls != 1 || s.OK != 1 {
			report.Errorf("%s job %d: %+v; want processed on attempt 1, one handler call, ended ok", table, s.ID, s)
			if !s.Processed {
				lost++
			}
		}
	}
	return lost
}

// checkMalformed checks that each malformed row failed once, with its reason, without a handler
// call. It returns how many failed so, and how many did not end at all (lost).
func (f *badInput) checkMalformed() (failed, lost int) {
	f.t.Helper()
	for id, want := range f.malformed {
		var attempts, calls int
		var isFailed, processed bool
		var lastError *string
		err := f.e.DB.QueryRow(context.Background(), `SELECT attempts_made, failed_at IS NOT NULL, processed_at IS NOT NULL, last_error,
			(SELECT count(*) FROM mp_ledger WHERE job_id = $1 AND kind = $2) FROM `+inputKind+` WHERE id = $1`, id, inputKind).
			Scan(&attempts, &isFailed, &processed, &lastError, &calls)
		switch {
		case err != nil:
			f.t.Errorf("malformed job %d: %v", id, err)
			lost++
		case !isFailed || processed || attempts != 1 || calls != 0 || lastError == nil || *lastError != want:
			f.t.Errorf("malformed job %d: failed %v, processed %v, %d attempts, %d handler calls, last error %v;\nwant failed on attempt 1, no handler call, last error %s",
				id, isFailed, processed, attempts, calls, strOrNil(lastError), want)
			if !isFailed && !processed {
				lost++
			}
		default:
			failed++
		}
	}
	return failed, lost
}

// strOrNil is *s, or nil, for messages.
func strOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// checkNothingElseWritten checks that the refused inputs left no trace: no row in either kind's table
// beyond what the test enqueued, no limit, registry row or schedule for any kind it named, and table y
// as it was.
func (f *badInput) checkNothingElseWritten() {
	f.t.Helper()
	ctx := context.Background()
	plain := slices.Concat(f.plain, f.huge, slices.Collect(maps.Keys(f.malformed)))
	for _, c := range []struct {
		what, sql string
		args      []any
	}{
		{"rows of " + inputKind + " the test did not enqueue", `SELECT count(*) FROM ` + inputKind + ` WHERE NOT id = ANY($1)`, []any{plain}},
		{"rows of " + faultkit.KeyedKind + " the test did not enqueue", `SELECT count(*) FROM ` + faultkit.KeyedKind + ` WHERE NOT id = ANY($1)`, []any{f.keyed}},
		{"kinds registered beyond the two", `SELECT count(*) FROM jobpipe_kinds WHERE name NOT IN ($1, $2)`, []any{faultkit.KeyedKind, inputKind}},
		{"limits stored", `SELECT (SELECT count(*) FROM jobpipe_kind_limits) + (SELECT count(*) FROM jobpipe_key_limits)`, nil},
		{"rows of y other than the one", `SELECT count(*) FROM y WHERE v IS DISTINCT FROM 'still here'`, nil},
	} {
		var n int
		if err := f.e.DB.QueryRow(ctx, c.sql, c.args...).Scan(&n); err != nil || n != 0 {
			f.t.Errorf("%s: %d (%v); want 0", c.what, n, err)
		}
	}
}

// duplicates counts jobs of either kind whose handler ended ok more than once.
func (f *badInput) duplicates() int {
	f.t.Helper()
	var n int
	if err := f.e.DB.QueryRow(context.Background(), `SELECT count(*) FROM (SELECT 1 FROM mp_ledger WHERE outcome = 'ok'
		GROUP BY kind, job_id HAVING count(*) > 1) d`).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	if n != 0 {
		f.t.Errorf("%d jobs ran to ok more than once", n)
	}
	return n
}

// checkAudit checks the plain kind's audit. A malformed row is finished by no handler call (it never
// reaches one), so its changes are checked here, apart: claimed once (waiting to running, a new
// token) and failed by that claim (running to failed, the same token), nothing else. Its audit rows are
// then set apart, and the rest goes through the shared CheckAudit. It returns the audited changes.
func (f *badInput) checkAudit() int {
	f.t.Helper()
	ctx := context.Background()
	ids := slices.Collect(maps.Keys(f.malformed))
	rows, err := f.e.DB.Query(ctx, `SELECT job_id, string_agg(format('%s->%s %s->%s', old_state, new_state, old_token, new_token), ', ' ORDER BY n)
		FROM fault_audit WHERE kind = $1 AND job_id = ANY($2) GROUP BY job_id`, inputKind, ids)
	if err != nil {
		f.t.Fatal(err)
	}
	changes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		ID      int64
		Changes string
	}])
	if err != nil {
		f.t.Fatal(err)
	}
	if len(changes) != len(ids) {
		f.t.Errorf("audit of the malformed rows: %v; want one entry for each of %v", changes, ids)
	}
	for _, c := range changes {
		if c.Changes != "waiting->running 0->1, running->failed 1->1" {
			f.t.Errorf("malformed job %d changed: %s; want claimed once and failed by that claim", c.ID, c.Changes)
		}
	}
	if _, err := f.e.DB.Exec(ctx, `UPDATE fault_audit SET kind = kind || ' (undecodable)' WHERE kind = $1 AND job_id = ANY($2)`, inputKind, ids); err != nil {
		f.t.Fatal(err)
	}
	return faultkit.CheckAudit(f.t, f.e.DB, inputKind, inputKind).Changes + 2*len(changes)
}
