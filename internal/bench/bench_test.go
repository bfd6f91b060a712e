package bench

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/internal/kindsql"
	"github.com/jobpipe/jobpipe/jobinfo"
)

func TestLedgerTally(t *testing.T) {
	t.Parallel()
	var l ledger
	for _, n := range []int64{0, 1, 1, 3, 70_000, 70_000, 70_000} {
		l.run(n)
	}
	dups, never, neverCount := l.tally(70_001, 3)
	if dups != 2 || neverCount != 70_001-4 || len(never) != 3 || never[0] != 2 || never[1] != 4 || never[2] != 5 {
		t.Errorf("tally: %d duplicates, never %v (%d)", dups, never, neverCount)
	}
	if l.runs.Load() != 7 {
		t.Errorf("runs %d, want 7", l.runs.Load())
	}
}

func TestReportPrintsResultLast(t *testing.T) {
	t.Parallel()
	r := newReport("drain")
	r.result("scenario", "drain")
	r.result("seconds", 1.5)
	r.result("sizes", []int{10, 20})
	r.result("version", "15.2 (Debian)")
	r.table(Table{Title: "t", Header: []string{"a", "b"}, Rows: [][]string{{"1", "two words"}}})
	r.fail("3 jobs ran more than once")
	var out bytes.Buffer
	r.Print(&out, false)
	want := "RESULT scenario=drain seconds=1.5 sizes=10,20 version=15.2_(Debian)\n"
	if !strings.HasSuffix(out.String(), "FAILED: 3 jobs ran more than once\n"+want) || !strings.Contains(out.String(), "two words") {
		t.Errorf("printed:\n%s", out.String())
	}
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Result   json.RawMessage `json:"result"`
		Failures []string        `json:"failures"`
	}
	if err := json.Unmarshal(buf.Bytes(), &obj); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, obj.Result); err != nil {
		t.Fatal(err)
	}
	if compact.String() != `{"scenario":"drain","seconds":1.5,"sizes":[10,20],"version":"15.2 (Debian)"}` || len(obj.Failures) != 1 {
		t.Errorf("JSON result %s, failures %v", compact.String(), obj.Failures)
	}
}

func TestStatementLabels(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"WITH expired AS (\n\tSELECT t.id FROM x t FOR UPDATE SKIP LOCKED)\nUPDATE x": "rescue",
		"WITH next AS (\n\tSELECT t.id FROM x t FOR UPDATE SKIP LOCKED)\nUPDATE x":    "claim plain (select+update)",
		"begin":                   "begin",
		"SELECT 1, 2, 3, 4, 5, 6": "select 1, 2, 3,",
	} {
		if got := statementLabel(sql); got != want {
			t.Errorf("statementLabel(%q) = %q, want %q", sql, got, want)
		}
	}
	// The finish statements notify too, and must not be taken for an enqueue's notification.
	type plain struct {
		A int64 `jobpipe:"a"`
	}
	type keyed struct {
		A int64 `jobpipe:"a,key"`
	}
	for kind, want := range map[*jobinfo.Info]string{
		jobinfo.MustDefine[plain]("plain").Info(): "finish (batch)",
		jobinfo.MustDefine[keyed]("keyed").Info(): "finish and next claims (keyed)",
	} {
		finish := kindsql.ForDispatcher(kind, kindsql.WriteCodes{}, "jobpipe").Finish
		if got := statementLabel(finish); got != want {
			t.Errorf("the finish statement of %s is labelled %q, want %q", kind.Name, got, want)
		}
	}
	d := kindsql.ForDispatcher(jobinfo.MustDefine[keyed]("keyed").Info(), kindsql.WriteCodes{}, "jobpipe")
	for sql, want := range map[string]string{d.BusySlots: "busy slots (keyed)", d.NextOfKeys: "next of running keys (keyed)", d.ClaimIDs: "claim ids (keyed)"} {
		if got := statementLabel(sql); got != want {
			t.Errorf("statementLabel(%.40q...) = %q, want %q", sql, got, want)
		}
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	var ds []time.Duration
	for i := 1; i <= 20; i++ {
		ds = append(ds, time.Duration(i))
	}
	if pct(ds, 50) != 10 || pct(ds, 95) != 19 || pct(ds[:1], 95) != 1 {
		t.Errorf("pct: %v %v %v", pct(ds, 50), pct(ds, 95), pct(ds[:1], 95))
	}
}

func TestSkipScanSQLUsesTheKey(t *testing.T) {
	t.Parallel()
	type twoKeys struct {
		A int64 `jobpipe:"a,key"`
		B int64 `jobpipe:"b,key"`
	}
	sql := skipScanSQL(jobinfo.MustDefine[twoKeys]("two_keys").Info())
	for _, want := range []string{`(t."a", t."b") > (h."a", h."b")`, `ORDER BY t."a", t."b", t.id LIMIT 1`,
		`e."a" = t."a" AND e."b" = t."b"`, "LIMIT $1\nFOR UPDATE OF t SKIP LOCKED"} {
		if !strings.Contains(sql, want) {
			t.Errorf("skip scan lacks %q:\n%s", want, sql)
		}
	}
}

func TestOptionsDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	o := Options{Scenario: "herd"}.withDefaults()
	if o.Jobs != DefaultHerdJobs || o.Pool != DefaultHerdPool || len(o.Dispatchers) != 5 || o.Schema != "jobpipe_bench_herd" {
		t.Errorf("herd defaults: %+v", o)
	}
	err := Options{Scenario: "drain", Jobs: -1, Dispatchers: []int{1, 2}, Schema: "Bad"}.withDefaults().Validate()
	for _, want := range []string{"--jobs must be positive, not -1", "only herd takes a list", "--schema: "} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want %q", err, want)
		}
	}
}

func TestSlotsWatch(t *testing.T) {
	t.Parallel()
	w := newSlotWatch(2, []int64{4, 1})
	w.enter(0)
	w.enter(0) // key 0 at its limit, 2 queued
	w.leave(0) // a slot frees at the limit: the wait starts
	time.Sleep(2 * time.Millisecond)
	w.enter(0) // refilled: one wait
	w.enter(0) // 3 running: over the limit
	w.leave(0)
	w.leave(0) // 0 queued now: no wait starts
	w.leave(0)
	w.enter(1)
	w.leave(1)
	all, key1 := w.summary(0, 2), w.summary(1, 2)
	if all.MaxPerKey != 3 || all.OverLimit != 1 || all.ReachedLimit != 1 || len(all.Waits) != 1 || all.Waits[0] < 2*time.Millisecond {
		t.Errorf("summary of both keys: %+v", all)
	}
	if key1.MaxPerKey != 1 || key1.ReachedLimit != 0 || len(key1.Waits) != 0 || key1.waitMs(99) != 0 {
		t.Errorf("summary of key 1: %+v", key1)
	}
	if w.started.Load() != 5 || w.ended.Load() != 5 {
		t.Errorf("started %d, ended %d; want 5 and 5", w.started.Load(), w.ended.Load())
	}
}

// The slow jobs are a fixed set of about the fraction asked, in whole runs of one key's consecutive
// jobs (jobs go round-robin over the keys), spread over the keys; with runs of 1, over every key.
func TestSlotsSlowJobs(t *testing.T) {
	t.Parallel()
	const jobs, keys = 200_000, 100
	for _, tc := range []struct {
		name           string
		run            int
		min, max, keys int
	}{
		{"evenly", 1, 1_800, 2_200, keys},
		{"runs of 20", 20, 1_200, 2_800, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			slow, onKey := 0, map[int64]bool{}
			for n := range int64(jobs) {
				s := slowJob(n, keys, tc.run, 0.01)
				if s != slowJob(n, keys, tc.run, 0.01) || slowJob(n, keys, tc.run, 0) || !slowJob(n, keys, tc.run, 1) {
					t.Fatalf("slowJob(%d) is not fixed, or not none at 0 and all at 1", n)
				}
				// n and n+keys are consecutive jobs of one key: in one run unless n+keys starts the next.
				if next := n + keys; (n/keys+1)%int64(tc.run) != 0 && next < jobs && slowJob(next, keys, tc.run, 0.01) != s {
					t.Fatalf("jobs %d and %d are in one run of key %d, and only one is slow", n, next, n%keys)
				}
				if s {
					slow++
					onKey[n%keys] = true
				}
			}
			if slow < tc.min || slow > tc.max || len(onKey) < tc.keys {
				t.Errorf("%d slow jobs of %d on %d keys; want %d to %d on at least %d keys", slow, jobs, len(onKey), tc.min, tc.max, tc.keys)
			}
		})
	}
}

// The bound is the most slow jobs of a key, sleeping on all its slots at once: for the default
// scenario, the 80 slow jobs of its slowest keys on 10 slots, 8 s.
func TestSlotsSlowBound(t *testing.T) {
	t.Parallel()
	if got := slowBound([]int64{3, 25, 0, 7}, time.Second, 10); got != 2500*time.Millisecond {
		t.Errorf("slowBound of 25 slow jobs on 10 slots = %v, want 2.5s", got)
	}
	const jobs, keys = 200_000, 100
	slowOfKey := make([]int64, keys)
	for n := range int64(jobs) {
		if slowJob(n, keys, 20, 0.01) {
			slowOfKey[n%keys]++
		}
	}
	if got := slowBound(slowOfKey, time.Second, 10); got != 8*time.Second {
		t.Errorf("the default scenario's slowBound = %v, want 8s (80 slow jobs on 10 slots)", got)
	}
}

// Keys are grouped by their slow jobs, each group with the mean and the latest of its keys' last
// job ends, in seconds after the start.
func TestKeysDoneBySlow(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	times := newJobTimes(8) // keys 0 to 3; job n is key n % 4, and key 3's jobs never end
	for n, secs := range map[int]float64{0: 1, 1: 4, 2: 2, 4: 3, 5: 1.5, 6: 6} {
		times.ended(int64(n), start.Add(time.Duration(secs*float64(time.Second))))
	}
	got := keysDoneBySlow(times, []int64{20, 0, 20, 40}, start)
	want := []keysDone{{Slow: 0, Keys: 1, Mean: 4, Max: 4}, {Slow: 20, Keys: 2, Mean: 4.5, Max: 6}}
	if !slices.Equal(got, want) {
		t.Errorf("keysDoneBySlow = %+v, want %+v", got, want)
	}
	if s, want := keysDoneString(got), "0 slow: 1, 4.00 / 4.00; 20 slow: 2, 4.50 / 6.00"; s != want {
		t.Errorf("keysDoneString = %q, want %q", s, want)
	}
}

func TestSlotsAndFairOptions(t *testing.T) {
	t.Parallel()
	if u, s := (Options{Scenario: "unique"}).withDefaults(), (Options{Scenario: "slots"}).withDefaults(); u.Workers != s.Workers || u.Workers != 1000 {
		t.Errorf("unique runs %d workers and slots %d; want 1000 both, so that their rates compare", u.Workers, s.Workers)
	}
	if o := (Options{Scenario: "unique", Workers: 64}).withDefaults(); o.Workers != 64 {
		t.Errorf("unique with --workers 64 runs %d workers", o.Workers)
	}
	o := Options{Scenario: "slots"}.withDefaults()
	if o.Jobs != DefaultSlotsJobs || o.Keys != 100 || o.KeyLimit != 10 || o.Workers != 1000 || o.SlowFraction != 0.01 ||
		o.Slow != time.Second || o.SlowRun != 20 || o.Schema != "jobpipe_bench_slots" {
		t.Errorf("slots defaults: %+v", o)
	}
	if o := (Options{Scenario: "slots", Jobs: 50, Keys: 100, KeyLimit: 3}).withDefaults(); o.Workers != 150 {
		t.Errorf("slots workers with 50 jobs over 100 keys, limit 3: %d; want 150 (50 keys x 3)", o.Workers)
	}
	o = Options{Scenario: "fair"}.withDefaults()
	if o.BigJobs != 100_000 || o.SmallKeys != 1_000 || o.KeyLimit != 10 || o.Workers != DefaultWorkers || o.Handler != time.Millisecond ||
		o.Tail != 2*time.Second || o.Drain {
		t.Errorf("fair defaults: %+v", o)
	}
	err := Options{Scenario: "slots", KeyLimit: 2000, SlowFraction: 1.5, Slow: -time.Second}.withDefaults().Validate()
	for _, want := range []string{"--key-limit must be from 1 to 1024, not 2000", "--slow-fraction must be from 0 to 1",
		"--slow, --handler and --tail must be positive"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want %q", err, want)
		}
	}
	err = Options{Scenario: "fair", BigJobs: maxLedgerJobs}.withDefaults().Validate()
	if err == nil || !strings.Contains(err.Error(), "--big-jobs plus --small-keys must be at most") {
		t.Errorf("Validate: %v; want the ledger's bound", err)
	}
}

func TestSlotsAndFairNeedRedis(t *testing.T) {
	t.Parallel()
	for name := range redisScenarios {
		if _, ok := scenarios[name]; !ok {
			t.Errorf("redisScenarios names %q, which is no scenario", name)
		}
	}
	if !redisScenarios["slots"] || !redisScenarios["fair"] || !redisScenarios["unique"] || redisScenarios["drain"] {
		t.Errorf("redisScenarios = %v", redisScenarios)
	}
}

// --vs appends the second run's scenario, its rate and the ratio of the rates to the first's RESULT
// line, and the second run works the job count the first reported, with the first's own flags.
func TestVersus(t *testing.T) {
	t.Parallel()
	first, other := newReport("unique"), newReport("drain")
	first.result("scenario", "unique")
	first.result("jobs", int64(20_000))
	first.result("jobs_per_s", 4_690.0)
	first.result("verified", true)
	other.result("scenario", "drain")
	other.result("jobs_per_s", 17_103.0)
	if err := first.Versus(other); err != nil {
		t.Fatal(err)
	}
	want := "RESULT scenario=unique jobs=20000 jobs_per_s=4690 verified=true vs=drain vs_jobs_per_s=17103 ratio=0.274"
	if got := first.ResultLine(); got != want {
		t.Errorf("ResultLine:\n got %s\nwant %s", got, want)
	}
	if first.Details["vs"] == nil {
		t.Error("the JSON details lack the second run")
	}
	// A run with a least work time also reports the ratio it could reach: its jobs in that time.
	slots, unique := newReport("slots"), newReport("unique")
	slots.result("jobs", int64(200_000))
	slots.result("slow_bound_s", 8.0)
	slots.result("jobs_per_s", 16_587.0)
	unique.result("jobs_per_s", 41_165.0)
	if err := slots.Versus(unique); err != nil {
		t.Fatal(err)
	}
	want = "RESULT jobs=200000 slow_bound_s=8 jobs_per_s=16587 vs=unique vs_jobs_per_s=41165 ratio=0.403 ratio_ceiling=0.607"
	if got := slots.ResultLine(); got != want {
		t.Errorf("ResultLine:\n got %s\nwant %s", got, want)
	}
	if err := newReport("herd").Versus(other); err == nil || !strings.Contains(err.Error(), "herd reported no jobs_per_s") {
		t.Errorf("Versus of a report without jobs_per_s: %v", err)
	}
	if r := ratio(1, 0); r != 0 {
		t.Errorf("ratio over 0 = %v, want 0", r)
	}

	o := VersusOptions(Options{Scenario: "unique", Keys: 2_000, Pool: 4}, first, "drain")
	if o.Scenario != "drain" || o.Jobs != 20_000 || o.Pool != 4 || o.Workers != 0 || o.Schema != "" {
		t.Errorf("VersusOptions: %+v; want drain on 20000 jobs with pool 4 and drain's own defaults", o)
	}

	for _, tc := range []struct{ scenario, vs, want string }{
		{"unique", "latency", `--vs "latency": want one of drain, slots, steady, unique`},
		{"herd", "drain", "--vs compares jobs_per_s, which herd does not report"},
	} {
		if err := ValidateVersus(tc.scenario, tc.vs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ValidateVersus(%s, %s) = %v; want %q", tc.scenario, tc.vs, err, tc.want)
		}
	}
	for _, s := range RateScenarios() {
		if ValidateVersus(s, "drain") != nil || ValidateVersus("drain", s) != nil {
			t.Errorf("%s is a rate scenario, but --vs refuses it", s)
		}
	}
}
