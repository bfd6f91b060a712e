package bench

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestLatencySchedule(t *testing.T) {
	t.Parallel()
	if n := latencyJobs(800, 5*time.Minute); n != 240_000 {
		t.Errorf("latencyJobs(800, 5m) = %d, want 240000", n)
	}
	if n := latencyJobs(3, 1500*time.Millisecond); n != 4 {
		t.Errorf("latencyJobs(3, 1.5s) = %d, want 4 (rounded down)", n)
	}
	if n := latencyJobs(maxRate, 1<<62); n <= 0 {
		t.Errorf("latencyJobs overflowed: %d", n)
	}
	for rate, want := range map[int]int{1: 2, 50: 2, 51: 3, 150: 6, 800: 32, maxRate: 32} {
		if got := latencyCallers(rate); got != want {
			t.Errorf("latencyCallers(%d) = %d, want %d", rate, got, want)
		}
	}
	if d := dueAt(800, 800); d != time.Second {
		t.Errorf("dueAt(800, 800) = %v, want 1s", d)
	}
	if d := dueAt(1, 800); d != 1250*time.Microsecond {
		t.Errorf("dueAt(1, 800) = %v, want 1.25ms", d)
	}
	for _, tc := range []struct {
		elapsed time.Duration
		want    int64
	}{
		{-time.Millisecond, 0},
		{0, 1}, // job 0 is due at the start
		{1249 * time.Microsecond, 1},
		{1250 * time.Microsecond, 2},
		{10 * time.Millisecond, 9},                // behind by several intervals: all of them at once
		{time.Hour, 100},                          // never past the last job
		{1250*time.Microsecond*99 + 1, 100},       // the last job
		{1250*time.Microsecond*99 - 1, 99},        // and just before it
		{time.Duration(1<<62) / maxRate * 8, 100}, // no overflow on long runs
	} {
		if got := dueBy(tc.elapsed, 800, 100); got != tc.want {
			t.Errorf("dueBy(%v, 800, 100) = %d, want %d", tc.elapsed, got, tc.want)
		}
	}
}

// A schedule whose start lies in the past sends every job already due at once, in order, then the
// rest on time; it ends after the last job.
func TestPaceCatchesUpInOrder(t *testing.T) {
	t.Parallel()
	out := make(chan int64, 100)
	start := time.Now().Add(-50 * time.Millisecond) // 50 jobs at 1,000/s are already due
	began := time.Now()
	if err := pace(context.Background(), start, 1000, 100, out); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	close(out)
	var got []int64
	for n := range out {
		got = append(got, n)
	}
	if len(got) != 100 || !slices.IsSorted(got) || got[0] != 0 || got[99] != 99 {
		t.Errorf("sent %v; want 0 to 99 in order", got)
	}
	if took < 45*time.Millisecond {
		t.Errorf("the last 50 jobs took %v; want about 50ms (on schedule, not at once)", took)
	}
}

func TestPaceStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan int64) // nobody reads: pace blocks on the first job until cancelled
	time.AfterFunc(10*time.Millisecond, cancel)
	if err := pace(ctx, time.Now(), 1000, 10, out); err != context.Canceled {
		t.Errorf("pace returned %v; want context.Canceled", err)
	}
}

func TestLatencySummary(t *testing.T) {
	t.Parallel()
	from, to := make([]atomic.Int64, 102), make([]atomic.Int64, 102)
	for i := range 100 {
		from[i].Store(int64(time.Second))
		to[i].Store(int64(time.Second) + int64(100-i)*int64(time.Millisecond)) // 100 ms down to 1 ms
	}
	from[100].Store(5) // began, never ended
	to[101].Store(5)   // no start recorded
	ds, missing := between(from, to)
	if len(ds) != 100 || missing != 2 {
		t.Fatalf("between: %d durations, %d missing; want 100 and 2", len(ds), missing)
	}
	got := summarize(ds)
	want := latencySummary{Count: 100, P50: 50, P90: 90, P99: 99, Max: 100}
	if got != want {
		t.Errorf("summarize = %+v, want %+v", got, want)
	}
	if s := got.String(); s != "50.00 / 90.00 / 99.00 / 100.00 ms" {
		t.Errorf("String() = %q", s)
	}
	if empty := summarize(nil); empty != (latencySummary{}) {
		t.Errorf("summarize(nil) = %+v, want zeros", empty)
	}
}

func TestLatencyAndMemoryOptions(t *testing.T) {
	t.Parallel()
	o := Options{Scenario: "latency"}.withDefaults()
	if o.Rate != 800 || o.Duration != 5*time.Minute || o.Workers != 32 || o.Handler != time.Millisecond ||
		o.Schema != "jobpipe_bench_latency" || o.Inflight != 0 {
		t.Errorf("latency defaults: %+v", o)
	}
	o = Options{Scenario: "memory"}.withDefaults()
	if o.Jobs != 20_000 || o.Inflight != 2_000 || o.Workers != 2_000 || o.Handler != 2*time.Second || o.Rate != 0 {
		t.Errorf("memory defaults: %+v", o)
	}
	if o := (Options{Scenario: "memory", Inflight: 50}).withDefaults(); o.Workers != 50 {
		t.Errorf("memory workers with --inflight 50: %d; want 50", o.Workers)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Scenario: "latency", Rate: -1}, "--rate must be positive, not -1"},
		{Options{Scenario: "latency", Rate: maxRate + 1}, "--rate must be at most 100000 jobs/s"},
		{Options{Scenario: "latency", Rate: 10, Duration: time.Millisecond}, "--rate times --duration must come to 1 to"},
		{Options{Scenario: "latency", Rate: maxRate, Duration: 24 * time.Hour}, "--rate times --duration must come to 1 to"},
		{Options{Scenario: "memory", Inflight: -3}, "--inflight must be positive, not -3"},
		{Options{Scenario: "memory", Jobs: 100}, "--jobs (100) and --workers (2000) must be at least --inflight (2000)"},
		{Options{Scenario: "memory", Workers: 10, Inflight: 20}, "--workers (10) must be at least --inflight (20)"},
	} {
		err := tc.o.withDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v): %v; want %q", tc.o, err, tc.want)
		}
	}
	for _, ok := range []Options{{Scenario: "latency", Rate: 1, Duration: time.Second}, {Scenario: "memory", Jobs: 5, Inflight: 5}} {
		if err := ok.withDefaults().Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", ok, err)
		}
	}
}
