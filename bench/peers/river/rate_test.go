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

func TestPerJob(t *testing.T) {
	if perJob(3*time.Second, 2000) != 1500 || perJob(time.Second, 0) != 0 {
		t.Error("perJob")
	}
}
