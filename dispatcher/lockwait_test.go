package dispatcher

import (
	"errors"
	"testing"
	"time"
)

var errTest = errors.New("execlock: lock nodes unavailable: node #0: refused")

// The watch warns once a kind's lock calls have kept failing for lockWaitGrace, reminds at most once
// per lockWaitRemind while they still fail, and reports the recovery once they no longer do.
func TestLockWaitNext(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	w := &kindLockWatch{}
	steps := []struct {
		now, since, last time.Duration
		failing          bool
		want             lockAction
	}{
		{now: 0, failing: false, want: lockNone},
		{now: 100 * time.Millisecond, since: 0, last: 0, failing: true, want: lockNone},                      // one failure
		{now: 900 * time.Millisecond, since: 0, last: 800 * time.Millisecond, failing: true, want: lockNone}, // not long enough
		{now: 1100 * time.Millisecond, since: 0, last: time.Second, failing: true, want: lockWarn},
		{now: 30 * time.Second, since: 0, last: 30 * time.Second, failing: true, want: lockNone},
		{now: 61 * time.Second, since: 0, last: 61 * time.Second, failing: true, want: lockNone}, // 59.9 s after the WARN
		{now: 62 * time.Second, since: 0, last: 62 * time.Second, failing: true, want: lockRemind},
		{now: 63 * time.Second, since: 0, last: 63 * time.Second, failing: true, want: lockNone},
		{now: 121 * time.Second, since: 0, last: 121 * time.Second, failing: true, want: lockNone},
		{now: 122 * time.Second, since: 0, last: 122 * time.Second, failing: true, want: lockRemind},
		{now: 123 * time.Second, failing: false, want: lockRecovered},
		{now: 124 * time.Second, failing: false, want: lockNone},
	}
	for i, s := range steps {
		got := w.next(at(s.now), s.failing, at(s.since), at(s.last))
		if got != s.want {
			t.Fatalf("step %d (at %v): %d, want %d", i, s.now, got, s.want)
		}
		// What watchKind does with each action.
		switch got {
		case lockWarn:
			w.reported, w.remindedAt = true, at(s.now)
		case lockRemind:
			w.remindedAt = at(s.now)
		case lockRecovered:
			w.reported = false
		}
	}
}

// A failure begins a run only once; a success or a quiet spell ends it.
func TestLockWaitRuns(t *testing.T) {
	t.Parallel()
	var w lockWait
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if !w.failed(errTest, t0) || w.failed(errTest, t0.Add(time.Second)) {
		t.Fatal("failed: want the first failure alone to begin a run")
	}
	if failing, since, last, _ := w.state(); !failing || !since.Equal(t0) || !last.Equal(t0.Add(time.Second)) {
		t.Fatalf("state = %v %v %v", failing, since, last)
	}
	if w.idleSince(t0.Add(time.Second)) {
		t.Fatal("idleSince: a failure at the cutoff is not quiet")
	}
	if !w.idleSince(t0.Add(2 * time.Second)) {
		t.Fatal("idleSince: no failure since the cutoff ends the run")
	}
	if !w.failed(errTest, t0.Add(3*time.Second)) {
		t.Fatal("a failure after a quiet spell begins a new run")
	}
	w.succeeded()
	if failing, _, _, _ := w.state(); failing {
		t.Fatal("a success ends the run")
	}
}
