package faultkit

// The fault suite's switch and its report of figures. The scenarios (tests named TestFault...) run
// only when JOBPIPE_FAULTS=1, which `make test-faults` sets: they take minutes, restart servers and
// measure throughput, so they run alone, not beside the rest of the suite.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// suiteEnv selects the fault scenarios; reportEnv names the file their figures are appended
// to (default: faults.txt under $JOBPIPE_ARTIFACTS_DIR, else $TMPDIR/jobpipe-artifacts).
const (
	suiteEnv  = "JOBPIPE_FAULTS"
	reportEnv = "JOBPIPE_FAULTS_REPORT"
)

// SkipUnlessFaultSuite skips t unless the fault suite was asked for.
func SkipUnlessFaultSuite(t *testing.T) {
	t.Helper()
	if os.Getenv(suiteEnv) != "1" {
		t.Skipf("a fault scenario: run it with `make test-faults` (%s=1)", suiteEnv)
	}
}

// reportPath is where the figures go.
func reportPath() string {
	if p := os.Getenv(reportEnv); p != "" {
		return p
	}
	dir := os.Getenv("JOBPIPE_ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "jobpipe-artifacts")
	}
	return filepath.Join(dir, "faults.txt")
}

var reportMu sync.Mutex

// ReportFigures reports a scenario's figures: pairs of name and value, logged and appended to the
// report as one line, "scenario | name=value; name=value". Values are formatted with %v; durations
// are rounded to the millisecond and float64s shown with one decimal.
func ReportFigures(t *testing.T, scenario string, pairs ...any) {
	t.Helper()
	if len(pairs)%2 != 0 {
		t.Fatalf("ReportFigures(%q): %d arguments, want name/value pairs", scenario, len(pairs))
	}
	var parts []string
	for i := 0; i < len(pairs); i += 2 {
		v := pairs[i+1]
		switch x := v.(type) {
		case time.Duration:
			v = x.Round(time.Millisecond)
		case float64:
			v = fmt.Sprintf("%.1f", x)
		}
		parts = append(parts, fmt.Sprintf("%v=%v", pairs[i], v))
	}
	line := scenario + " | " + strings.Join(parts, "; ")
	t.Log("FIGURES " + line)
	reportMu.Lock()
	defer reportMu.Unlock()
	path := reportPath()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Errorf("fault report: %v", err)
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("fault report: %v", err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, line); err != nil {
		t.Errorf("fault report: %v", err)
	}
}
