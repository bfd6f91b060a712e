package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

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
