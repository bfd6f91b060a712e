package faultkit

// Durations of calls summarised (count, failures, p50, p99, max), and shown in figures.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Latency summarises how long a set of calls took.
type Latency struct {
	N, Failed     int
	P50, P99, Max time.Duration
}

// String shows the summary in the figures and the log.
func (l Latency) String() string {
	return fmt.Sprintf("%d calls (%d failed), p50 %v, p99 %v, max %v", l.N, l.Failed,
		l.P50.Round(10*time.Microsecond), l.P99.Round(10*time.Microsecond), l.Max.Round(10*time.Microsecond))
}

// summarise summarises durations, failed of which failed.
func summarise(took []time.Duration, failed int) Latency {
	l := Latency{N: len(took), Failed: failed}
	if len(took) == 0 {
		return l
	}
	slices.Sort(took)
	at := func(q float64) time.Duration { return took[min(len(took)-1, int(q*float64(len(took))))] }
	l.P50, l.P99, l.Max = at(0.5), at(0.99), took[len(took)-1]
	return l
}

// P99s shows the p99s of ls, "/"-separated.
func P99s(ls []Latency) string {
	return eachLatency(ls, func(l Latency) time.Duration { return l.P99 })
}

// P50s shows the p50s of ls, "/"-separated.
func P50s(ls []Latency) string {
	return eachLatency(ls, func(l Latency) time.Duration { return l.P50 })
}

// eachLatency shows of(l) for each l of ls, "/"-separated (JoinDurations).
func eachLatency(ls []Latency, of func(Latency) time.Duration) string {
	ds := make([]time.Duration, len(ls))
	for i, l := range ls {
		ds[i] = of(l)
	}
	return JoinDurations(ds...)
}

// JoinDurations shows durations to the tenth of a millisecond, "/"-separated.
func JoinDurations(ds ...time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Microsecond).String()
	}
	return strings.Join(out, "/")
}

// CheckBounded fails t when calls took longer than bound, or failed while noFailures.
func CheckBounded(t *testing.T, what string, l Latency, bound time.Duration, noFailures bool) {
	t.Helper()
	if l.N == 0 {
		t.Errorf("%s: none measured", what)
	}
	if l.Max > bound {
		t.Errorf("%s: %v; want none longer than %v", what, l, bound)
	}
	if noFailures && l.Failed > 0 {
		t.Errorf("%s: %v; want no failure", what, l)
	}
}

// SinceOrNone is at - from, or "none" when at is zero.
func SinceOrNone(at, from time.Time) any {
	if at.IsZero() {
		return "none"
	}
	return at.Sub(from)
}

// CallLatencies are a run's lock calls (timed by the lock probe), the probe jobs' heartbeats and the
// keyed kind's start lags, each before, during and after a fault.
type CallLatencies struct{ Locks, Beats, Lags [3]Latency }

// MeasureCalls summarises the calls that started in each of the windows before, during and after a
// fault, and checks the lock calls and heartbeats against their bounds (CheckBounded), with no
// failure allowed in a window where noFailures says so.
func (e *RedisWorld) MeasureCalls(t *testing.T, locks *LockProbe, windows [3][2]time.Time, lockBound, beatBound time.Duration, noFailures func(phase int) bool) CallLatencies {
	t.Helper()
	var c CallLatencies
	for i, phase := range []string{"before", "during", "after"} {
		c.Locks[i] = locks.Between(windows[i][0], windows[i][1])
		c.Beats[i] = e.Heartbeats(t, windows[i][0], windows[i][1])
		c.Lags[i] = e.StartLag(t, windows[i][0], windows[i][1])
		CheckBounded(t, "lock calls "+phase, c.Locks[i], lockBound, noFailures(i))
		CheckBounded(t, "heartbeats "+phase, c.Beats[i], beatBound, noFailures(i))
	}
	return c
}
