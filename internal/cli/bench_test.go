package cli

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jobpipe/jobpipe/internal/testenv"
)

// resultLine checks that stdout ends with one RESULT line holding every key in keys and a clean
// accounting, and returns its pairs.
func resultLine(t *testing.T, stdout string, keys ...string) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "RESULT ") {
		t.Fatalf("the last line is not the RESULT line: %q\n%s", last, stdout)
	}
	pairs := map[string]string{}
	for _, f := range strings.Fields(strings.TrimPrefix(last, "RESULT ")) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("RESULT field %q is not key=value: %s", f, last)
		}
		pairs[k] = v
	}
	for _, k := range append(keys, "duplicates", "lost", "verified") {
		if _, ok := pairs[k]; !ok {
			t.Errorf("RESULT lacks %s: %s", k, last)
		}
	}
	if pairs["duplicates"] != "0" || pairs["lost"] != "0" || pairs["verified"] != "true" {
		t.Errorf("accounting: %s", last)
	}
	return pairs
}

// runBenchCLI runs a bench scenario at a tiny scale in a schema of the test's own and checks that it
// succeeds.
func runBenchCLI(t *testing.T, args ...string) (stdout string) {
	t.Helper()
	s := testenv.NewSchema(t)
	args = append([]string{"bench"}, append(args, "--database-url", s.URL, "--schema", s.Name, "--progress", "0")...)
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("jobpipe %q: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
	}
	return stdout
}

func TestBenchDrain(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "drain.json")
	stdout := runBenchCLI(t, "drain", "--jobs", "2000", "--json", out)
	p := resultLine(t, stdout, "scenario", "jobs", "seconds", "jobs_per_s", "dead_tuples", "early")
	if p["scenario"] != "drain" || p["jobs"] != "2000" || p["early"] != "0" {
		t.Errorf("RESULT: %v", p)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Result   map[string]any `json:"result"`
		Line     string         `json:"result_line"`
		Failures []string       `json:"failures"`
		Details  struct {
			Statements []struct{ Statement string } `json:"statements"`
		} `json:"details"`
	}
	if err := json.Unmarshal(data, &report); err != nil {
		t.Fatalf("--json: %v\n%s", err, data)
	}
	if report.Result["jobs"] != 2000.0 || len(report.Failures) != 0 || !strings.HasSuffix(stdout, report.Line+"\n") {
		t.Errorf("--json report: %+v", report)
	}
	labels := map[string]bool{}
	for _, s := range report.Details.Statements {
		labels[s.Statement] = true
	}
	if !labels["claim plain (select+update)"] || !labels["finish (batch)"] {
		t.Errorf("statement timings lack the claim and the finish: %v", labels)
	}
}

func TestBenchSteady(t *testing.T) {
	t.Parallel()
	p := resultLine(t, runBenchCLI(t, "steady", "--duration", "2s", "--backlog", "500"),
		"scenario", "jobs", "seconds", "jobs_per_s", "backlog_mean", "early")
	if p["scenario"] != "steady" || p["jobs"] == "0" {
		t.Errorf("RESULT: %v", p)
	}
}

func TestBenchUnique(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	p := resultLine(t, runBenchCLI(t, "unique", "--jobs", "2000", "--keys", "50", "--redis-url", strings.Join(r.Addrs, ",")),
		"scenario", "jobs", "keys", "redis_nodes", "jobs_per_s", "max_per_key", "out_of_order", "lock_taken")
	if p["max_per_key"] != "1" || p["out_of_order"] != "0" || p["keys"] != "50" {
		t.Errorf("RESULT: %v", p)
	}
}

// --vs drain after unique with one job per key (shallow keys): drain runs next on the same job
// count, its RESULT line comes before unique's, and unique's ends with the comparison.
func TestBenchVersusDrain(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	stdout := runBenchCLI(t, "unique", "--jobs", "1500", "--keys", "1500", "--vs", "drain", "--redis-url", strings.Join(r.Addrs, ","))
	p := resultLine(t, stdout, "scenario", "jobs", "keys", "jobs_per_s", "vs", "vs_jobs_per_s", "ratio")
	if p["scenario"] != "unique" || p["jobs"] != "1500" || p["keys"] != "1500" || p["max_per_key"] != "1" || p["vs"] != "drain" {
		t.Errorf("RESULT: %v", p)
	}
	var drain map[string]string
	for _, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(line, "RESULT scenario=drain ") {
			if drain != nil {
				t.Fatalf("two drain RESULT lines:\n%s", stdout)
			}
			drain = resultLine(t, line, "jobs", "jobs_per_s")
		}
	}
	if drain == nil {
		t.Fatalf("no RESULT line of drain:\n%s", stdout)
	}
	if drain["jobs"] != "1500" || drain["jobs_per_s"] != p["vs_jobs_per_s"] {
		t.Errorf("drain's RESULT %v; want 1500 jobs and jobs_per_s %s", drain, p["vs_jobs_per_s"])
	}
	checkWorkCost(t, stdout, p, true)
	checkWorkCost(t, stdout, drain, false)
	mine, _ := strconv.ParseFloat(p["jobs_per_s"], 64)
	theirs, _ := strconv.ParseFloat(p["vs_jobs_per_s"], 64)
	got, err := strconv.ParseFloat(p["ratio"], 64)
	if err != nil || theirs <= 0 || math.Abs(got-mine/theirs) > 0.0005 {
		t.Errorf("ratio=%s; want jobs_per_s / vs_jobs_per_s = %v / %v", p["ratio"], mine, theirs)
	}
}

// checkWorkCost checks a run's cost per job: statements and, for a keyed run, the Redis round trips
// that carried its lock commands, all positive; the CPU time of this process, of PostgreSQL, of the
// machine and of the lock nodes, positive too where they could be read (the server runs on this
// machine); else the run says why not.
func checkWorkCost(t *testing.T, stdout string, p map[string]string, keyed bool) {
	t.Helper()
	keys := []string{"statements_per_job"}
	if keyed {
		keys = append(keys, "redis_trips_per_job")
	}
	if _, measured := p["worker_cpu_us_per_job"]; measured {
		keys = append(keys, "worker_cpu_us_per_job", "pg_cpu_us_per_job", "machine_cpu_us_per_job")
		if keyed {
			keys = append(keys, "redis_cpu_us_per_job")
		}
	} else if !regexp.MustCompile(`(?m)^  CPU time +not measured +\S`).MatchString(stdout) {
		t.Errorf("%s: no CPU time per job, and no reason given:\n%s", p["scenario"], stdout)
	}
	for _, k := range keys {
		if v, err := strconv.ParseFloat(p[k], 64); err != nil || v <= 0 {
			t.Errorf("%s: %s = %q; want a positive number", p["scenario"], k, p[k])
		}
	}
	if _, ok := p["redis_trips_per_job"]; ok != keyed {
		t.Errorf("%s: redis_trips_per_job present %v; want %v", p["scenario"], ok, keyed)
	}
}

// --spawn-redis starts its own nodes and kills them at the end.
func TestBenchUniqueSpawnsRedis(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed")
	}
	stdout := runBenchCLI(t, "unique", "--jobs", "600", "--keys", "20", "--spawn-redis", "3")
	p := resultLine(t, stdout, "redis_nodes", "max_per_key")
	if p["redis_nodes"] != "3" || p["max_per_key"] != "1" {
		t.Errorf("RESULT: %v", p)
	}
	if !regexp.MustCompile(`(?m)^  redis_spawned +true$`).MatchString(stdout) {
		t.Errorf("the settings do not say the nodes were spawned:\n%s", stdout)
	}
}

func TestBenchSlots(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	out := runBenchCLI(t, "slots", "--jobs", "3000", "--keys", "20", "--key-limit", "3", "--slow-fraction", "0.05",
		"--slow", "50ms", "--key-run-jobs", "20", "--key-run-time", "2s", "--redis-url", strings.Join(r.Addrs, ","))
	for _, setting := range []string{"key_run_jobs", "key_run_time"} {
		if !strings.Contains(out, setting) {
			t.Errorf("the settings leave out %s:\n%s", setting, out)
		}
	}
	p := resultLine(t, out,
		"scenario", "jobs", "keys", "key_limit", "slow_jobs", "workers", "jobs_per_s", "max_per_key", "over_limit", "reached_limit_keys",
		"lock_failed", "lock_failed_per_1k_jobs", "slot_waits", "slot_wait_p50_ms", "slot_wait_p99_ms", "early")
	if p["scenario"] != "slots" || p["keys"] != "20" || p["key_limit"] != "3" || p["workers"] != "60" || p["over_limit"] != "0" {
		t.Errorf("RESULT: %v", p)
	}
	if n, err := strconv.Atoi(p["max_per_key"]); err != nil || n < 1 || n > 3 {
		t.Errorf("max_per_key = %s; want 1 to 3", p["max_per_key"])
	}
	if n, err := strconv.Atoi(p["slow_jobs"]); err != nil || n < 100 || n > 200 {
		t.Errorf("slow_jobs = %s; want about 150 (5%% of 3000)", p["slow_jobs"])
	}
}

func TestBenchFair(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"tail", []string{"--big-jobs", "3000", "--tail", "200ms"}},
		{"drain", []string{"--big-jobs", "300", "--drain"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"fair", "--small-keys", "50", "--key-limit", "3", "--redis-url", strings.Join(r.Addrs, ",")}, tc.extra...)
			p := resultLine(t, runBenchCLI(t, args...), "scenario", "big_jobs", "small_keys", "key_limit", "small_start_p50_ms",
				"small_start_p99_ms", "small_start_max_ms", "big_started_before_last_small", "small_done_s", "seconds", "big_done",
				"big_left", "big_jobs_per_s", "big_max_running", "over_limit", "lock_failed", "early")
			big, _ := strconv.Atoi(p["big_jobs"])
			done, _ := strconv.Atoi(p["big_done"])
			left, _ := strconv.Atoi(p["big_left"])
			maxBig, _ := strconv.Atoi(p["big_max_running"])
			if p["scenario"] != "fair" || p["small_keys"] != "50" || p["over_limit"] != "0" || maxBig < 1 || maxBig > 3 ||
				done+left > big || p["small_start_max_ms"] == "0" {
				t.Errorf("RESULT: %v", p)
			}
			if slices.Contains(tc.extra, "--drain") && (left != 0 || done != big) {
				t.Errorf("--drain left %d of %d big jobs (done %d)", left, big, done)
			}
		})
	}
}

func TestBenchHerd(t *testing.T) {
	t.Parallel()
	p := resultLine(t, runBenchCLI(t, "herd", "--jobs", "1000", "--dispatchers", "1,3", "--lead", "2s"),
		"scenario", "dispatchers", "seconds_d1", "seconds_d3", "last_start_s_d3", "wasted_claims", "early")
	if p["dispatchers"] != "1,3" || p["early"] != "0" {
		t.Errorf("RESULT: %v", p)
	}
}

func TestBenchSelect(t *testing.T) {
	t.Parallel()
	stdout := runBenchCLI(t, "select", "--sizes", "1000,5000", "--keys", "500", "--repeat", "3", "--explain")
	p := resultLine(t, stdout, "scenario", "sizes", "p50_ms_1000", "p95_ms_5000", "skipscan_p50_ms_5000", "ratio", "faster", "bad_heads")
	if p["sizes"] != "1000,5000" || p["bad_heads"] != "0" {
		t.Errorf("RESULT: %v", p)
	}
	if !strings.Contains(stdout, "EXPLAIN (ANALYZE, BUFFERS) of the dispatcher's fast walk, 5000 pending rows") {
		t.Errorf("--explain printed no plan:\n%s", stdout)
	}
}

func TestBenchLatency(t *testing.T) {
	t.Parallel()
	p := resultLine(t, runBenchCLI(t, "latency", "--duration", "2s", "--rate", "150", "--workers", "4"),
		"scenario", "jobs", "rate", "rate_achieved", "seconds", "workers", "handler_ms", "start_p50_ms", "start_p90_ms",
		"start_p99_ms", "start_max_ms", "e2e_p50_ms", "e2e_p90_ms", "e2e_p99_ms", "e2e_max_ms", "enqueue_p99_ms",
		"targets_met", "early")
	if p["scenario"] != "latency" || p["jobs"] != "300" || p["rate"] != "150" || p["workers"] != "4" || p["handler_ms"] != "1" ||
		p["early"] != "0" {
		t.Errorf("RESULT: %v", p)
	}
	// Every job started after its Enqueue call and ended after its start: each percentile is positive
	// and no larger than the next.
	for _, m := range []string{"start", "e2e"} {
		prev := 0.0
		for _, q := range []string{"p50", "p90", "p99", "max"} {
			v, err := strconv.ParseFloat(p[m+"_"+q+"_ms"], 64)
			if err != nil || v <= 0 || v < prev {
				t.Errorf("%s_%s_ms = %s after %v; want a positive, non-decreasing value", m, q, p[m+"_"+q+"_ms"], prev)
			}
			prev = v
		}
	}
}

// rate at 100 jobs/s for 3 s: every measurement is in the RESULT line and the accounting holds.
// The run reads the server's backends in /proc, so it needs the server on this machine.
func TestBenchRate(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	args := []string{"bench", "rate", "--rate", "100", "--duration", "3s", "--database-url", s.URL, "--schema", s.Name, "--progress", "0"}
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 && strings.Contains(stderr, "the server is not a process of this machine") {
		t.Skipf("the test server runs elsewhere: %s", firstLine(stderr))
	}
	if code != 0 {
		t.Fatalf("jobpipe %q: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
	}
	p := resultLine(t, stdout, "scenario", "jobs", "rate", "rate_achieved", "seconds", "jobs_per_s", "workers", "handler_ms",
		"start_p50_ms", "start_p99_ms", "worker_cpu_us_per_job", "pg_cpu_us_per_job", "machine_cpu_us_per_job",
		"xacts_per_job", "dispatch_xacts_per_job", "early")
	if p["scenario"] != "rate" || p["jobs"] != "300" || p["rate"] != "100" || p["workers"] != "32" || p["handler_ms"] != "1" ||
		p["early"] != "0" {
		t.Errorf("RESULT: %v", p)
	}
	num := func(key string) float64 {
		v, err := strconv.ParseFloat(p[key], 64)
		if err != nil {
			t.Errorf("%s = %q: not a number", key, p[key])
		}
		return v
	}
	// Both sides did work, the machine did at least what they did, and each job took at least its
	// own Enqueue transaction and more to be claimed and finished.
	worker, pg, machine := num("worker_cpu_us_per_job"), num("pg_cpu_us_per_job"), num("machine_cpu_us_per_job")
	if worker <= 0 || pg <= 0 || machine < pg {
		t.Errorf("CPU per job: worker %v, pg %v, machine %v µs; want both positive and the machine's at least PostgreSQL's", worker, pg, machine)
	}
	if x, rest := num("xacts_per_job"), num("dispatch_xacts_per_job"); x < 1 || rest <= 0 || math.Abs(x-rest-1) > 0.011 {
		t.Errorf("xacts_per_job %v, dispatch_xacts_per_job %v; want at least 1, and one less", x, rest)
	}
	if p50, p99 := num("start_p50_ms"), num("start_p99_ms"); p50 <= 0 || p99 < p50 {
		t.Errorf("start p50 %v, p99 %v ms", p50, p99)
	}
	if !strings.Contains(stdout, "PostgreSQL backends' CPU") {
		t.Errorf("no CPU table:\n%s", stdout)
	}
}

func TestBenchMemory(t *testing.T) {
	t.Parallel()
	stdout := runBenchCLI(t, "memory", "--jobs", "120", "--inflight", "40", "--handler", "300ms")
	p := resultLine(t, stdout, "scenario", "jobs", "inflight", "inflight_max", "workers", "seconds", "rss_base_mib", "rss_peak_mib",
		"inflight_at_peak", "rss_at_inflight_mib", "hwm_mib", "heap_peak_mib", "sys_peak_mib", "goroutines_peak", "gate_timeouts",
		"targets_met", "early")
	// The handlers hold until all 40 run, so 40 ran at once, never more (40 workers).
	if p["scenario"] != "memory" || p["jobs"] != "120" || p["inflight"] != "40" || p["inflight_max"] != "40" || p["workers"] != "40" ||
		p["gate_timeouts"] != "0" {
		t.Errorf("RESULT: %v", p)
	}
	// Three groups of 40 hold 300 ms each: some sample saw all 40 running.
	if rss, err := strconv.ParseFloat(p["rss_at_inflight_mib"], 64); err != nil || rss <= 0 {
		t.Errorf("rss_at_inflight_mib = %s; want the RSS of a sample with all 40 in flight", p["rss_at_inflight_mib"])
	}
	if g, err := strconv.Atoi(p["goroutines_peak"]); err != nil || g < 40 {
		t.Errorf("goroutines_peak = %s; want at least one per job in flight", p["goroutines_peak"])
	}
}

// A schema that holds tables the bench did not create is never dropped.
func TestBenchRefusesForeignSchema(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	if _, err := s.Pool.Exec(context.Background(), "CREATE TABLE precious (id int)"); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "bench", "drain", "--jobs", "10", "--database-url", s.URL, "--schema", s.Name)
	if code != 1 || !strings.Contains(stderr, "was not made by jobpipe bench: pick another --schema") {
		t.Errorf("exit %d, stderr %q; want exit 1 and a refusal", code, stderr)
	}
	var n int
	if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM precious").Scan(&n); err != nil {
		t.Errorf("the table is gone: %v", err)
	}
}

// A schema that another run is using is left to it: dropped and created again under that run, it would
// make both report lost and doubled jobs.
func TestBenchRefusesSchemaInUse(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	ctx := context.Background()
	other, err := s.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if _, err := other.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended('jobpipe bench ' || $1, 0))", s.Name); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "bench", "drain", "--jobs", "10", "--database-url", s.URL, "--schema", s.Name)
	if code != 1 || !strings.Contains(stderr, "schema "+s.Name+" is in use by another jobpipe bench run: wait for it to end, or give this run another --schema") {
		t.Errorf("exit %d, stderr %q; want exit 1 and a refusal", code, stderr)
	}
	if _, err := other.Exec(ctx, "SELECT pg_advisory_unlock(hashtextextended('jobpipe bench ' || $1, 0))", s.Name); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "bench", "drain", "--jobs", "10", "--database-url", s.URL, "--schema", s.Name, "--progress", "0")
	if code != 0 {
		t.Errorf("once the schema is free: exit %d, stderr %q; want exit 0", code, stderr)
	}
}

// rate runs in a database named after --schema, created for the run; one it did not create stays.
func TestBenchRateRefusesForeignDatabase(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	ctx := context.Background()
	if _, err := s.Pool.Exec(ctx, "CREATE DATABASE "+s.Name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = s.Pool.Exec(context.Background(), "DROP DATABASE IF EXISTS "+s.Name+" WITH (FORCE)") })
	code, _, stderr := runCLI(t, "bench", "rate", "--rate", "10", "--duration", "1s", "--database-url", s.URL, "--schema", s.Name)
	if code != 1 || !strings.Contains(stderr, "database "+s.Name+" exists and was not made by jobpipe bench: pick another --schema") {
		t.Errorf("exit %d, stderr %q; want exit 1 and a refusal", code, stderr)
	}
	var n int
	if err := s.Pool.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", s.Name).Scan(&n); err != nil || n != 1 {
		t.Errorf("the database is gone: %d, %v", n, err)
	}
}

func TestBenchRefusesBadFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "missing the scenario: one of drain, fair, herd, latency, memory, rate, select, slots, steady, unique"},
		{[]string{"nosuch"}, `unknown scenario "nosuch": want one of [drain fair herd latency memory rate select slots steady unique]`},
		{[]string{"drain", "steady"}, "too many arguments"},
		{[]string{"drain", "--jobs", "-1"}, "--jobs must be positive, not -1"},
		{[]string{"drain", "--jobs", "0"}, "--jobs must be positive, not 0"},
		{[]string{"steady", "--duration", "0s"}, "--duration must be positive, not 0"},
		{[]string{"drain", "--dispatchers", "1,3"}, "--dispatchers: only herd takes a list; drain takes one number"},
		{[]string{"herd", "--dispatchers", "1,x"}, `--dispatchers: "x" is not a positive count`},
		{[]string{"select", "--sizes", "10k,0"}, `--sizes: "0" is not a positive count`},
		{[]string{"unique", "--spawn-redis", "-2"}, "--spawn-redis must be from 0 to 7, not -2"},
		{[]string{"drain", "--schema", "a;b"}, "--schema: "},
		{[]string{"slots", "--key-limit", "2000"}, "--key-limit must be from 1 to 1024, not 2000"},
		{[]string{"slots", "--slow-fraction", "1.5"}, "--slow-fraction must be from 0 to 1"},
		{[]string{"slots", "--slow-fraction", "0"}, "--slow-fraction must be positive, not 0"},
		{[]string{"fair", "--tail", "0s"}, "--tail must be positive, not 0"},
		{[]string{"slots", "--key-run-jobs", "-1"}, "--key-run-jobs must be positive, not -1"},
		{[]string{"slots", "--key-run-time", "-1s"}, "--duration, --lead, --timeout and --key-run-time must be positive"},
		{[]string{"fair", "--big-jobs", "-5"}, "--big-jobs must be positive, not -5"},
		{[]string{"latency", "--rate", "0"}, "--rate must be positive, not 0"},
		{[]string{"latency", "--rate", "-5"}, "--rate must be positive, not -5"},
		{[]string{"latency", "--rate", "200000"}, "--rate must be at most 100000 jobs/s, not 200000"},
		{[]string{"latency", "--rate", "x"}, `invalid value "x" for flag -rate`},
		{[]string{"latency", "--duration", "1ms", "--rate", "100"}, "--rate times --duration must come to 1 to"},
		{[]string{"latency", "--handler", "-1ms"}, "--slow, --handler and --tail must be positive"},
		{[]string{"rate", "--rate", "0"}, "--rate must be positive, not 0"},
		{[]string{"rate", "--duration", "1ms", "--rate", "100"}, "--rate times --duration must come to 1 to"},
		{[]string{"rate", "--vs", "drain"}, "--vs compares throughput, and rate runs at the fixed --rate"},
		{[]string{"memory", "--inflight", "0"}, "--inflight must be positive, not 0"},
		{[]string{"memory", "--inflight", "-1"}, "--inflight must be positive, not -1"},
		{[]string{"memory", "--jobs", "100"}, "--jobs (100) and --workers (2000) must be at least --inflight (2000)"},
		{[]string{"memory", "--inflight", "50", "--workers", "10"}, "--workers (10) must be at least --inflight (50)"},
		{[]string{"drain", "--nosuch"}, "flag provided but not defined: -nosuch"},
		{[]string{"unique", "--vs", "latency"}, `--vs "latency": want one of drain, slots, steady, unique (the scenarios that report jobs_per_s)`},
		{[]string{"drain", "--vs", ""}, `--vs "": want one of drain, slots, steady, unique`},
		{[]string{"herd", "--vs", "drain"}, "--vs compares jobs_per_s, which herd does not report: use it after one of drain, slots, steady, unique"},
	} {
		code, stdout, stderr := runCLI(t, append([]string{"bench"}, tc.args...)...)
		if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "jobpipe bench: ") || !strings.Contains(stderr, tc.want) ||
			!strings.HasSuffix(stderr, benchUsage) {
			t.Errorf("bench %q: exit %d, stderr %q; want exit 2 and %q with the usage", tc.args, code, firstLine(stderr), tc.want)
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func TestBenchHelp(t *testing.T) {
	t.Parallel()
	code, stdout, _ := runCLI(t, "help", "bench")
	if code != 0 || stdout != benchUsage {
		t.Errorf("help bench: exit %d\n%s", code, stdout)
	}
	for _, want := range []string{"drain|steady|unique|slots|fair|herd|select|latency|rate|memory", ">= 30,000 jobs/s", "--spawn-redis N",
		"--rate N", "--inflight N", "--vs SCENARIO", "one job per key (shallow keys)", "enqueue-to-start p99 <= 20 ms, end-to-end p99 <= 50 ms", "RSS <= 100 MiB",
		"[herd 1,3,5,7,10; others 1]", "--key-limit N", "--big-jobs N", "--small-keys N", ">= 90% of unique's jobs/s"} {
		if !strings.Contains(benchUsage, want) {
			t.Errorf("the usage lacks %q", want)
		}
	}
}
