package main

import (
	"context"
	"slices"
	"testing"
	"time"
)

// The schedule and the callers are jobpipe's (internal/bench/latency_test.go checks the same values).
func TestRateSchedule(t *testing.T) {
	if n := rateJobs(600, 5*time.Minute); n != 180_000 {
		t.Errorf("rateJobs(600, 5m) = %d, want 180000", n)
	}
	if n := rateJobs(3, 1500*time.Millisecond); n != 4 {
		t.Errorf("rateJobs(3, 1.5s) = %d, want 4", n)
	}
	for rate, want := range map[int]int{1: 2, 50: 2, 51: 3, 150: 6, 600: 24, 800: 32, maxRate: 32} {
		if got := rateCallers(rate); got != want {
			t.Errorf("rateCallers(%d) = %d, want %d", rate, got, want)
		}
	}
	for _, tc := range []struct {
		elapsed time.Duration
		want    int64
	}{{-time.Millisecond, 0}, {0, 1}, {1249 * time.Microsecond, 1}, {1250 * time.Microsecond, 2}, {time.Hour, 100}} {
		if got := dueBy(tc.elapsed, 800, 100); got != tc.want {
			t.Errorf("dueBy(%v, 800, 100) = %d, want %d", tc.elapsed, got, tc.want)
		}
	}
	out := make(chan int64, 100)
	start := time.Now().Add(-50 * time.Millisecond)
	if err := pace(context.Background(), start, 1000, 100, out); err != nil {
		t.Fatal(err)
	}
	close(out)
	var got []int64
	for n := range out {
		got = append(got, n)
	}
	if len(got) != 100 || !slices.IsSorted(got) {
		t.Errorf("pace sent %v", got)
	}
	if len(ratePayload) != ratePayloadBytes || ratePayloadBytes != 256 {
		t.Errorf("payload of %d bytes", len(ratePayload))
	}
}

func TestParseProcAndMachineStat(t *testing.T) {
	line := "4242 (post gres) (x)) S 1 4242 4242 0 -1 4194560 500 0 0 0 1234 567 0 0 20 0 1 0 98765 1000000 300 0\n"
	if got, err := parseProcStat([]byte(line)); err != nil || got != (procTimes{comm: "post gres) (x)", cpu: 1801, start: 98765}) {
		t.Errorf("parseProcStat = %+v, %v", got, err)
	}
	data := "cpu  100 5 50 1000 20 3 2 1 7 0\ncpu0 50 2 25 500 10 1 1 0 0 0\nbtime 1700000000\n"
	if got, err := parseMachineStat([]byte(data)); err != nil || got != (machineTimes{busy: 161, all: 1181, boot: 1700000000}) {
		t.Errorf("parseMachineStat = %+v, %v", got, err)
	}
	if perJob(3*time.Second, 2000) != 1500 || perJob(time.Second, 0) != 0 {
		t.Error("perJob")
	}
}
