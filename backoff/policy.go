package backoff

import (
	"math"
	"time"
)

// Policy decides how long a failed job waits before its next attempt.
//
// attempt is the number of attempts made so far: 1 means the first attempt
// has just failed. Every Policy in this package follows the same contract,
// and callers may rely on it for any Policy they are given:
//   - attempt < 1 is treated as 1, so a miscounted attempt cannot produce a
//     surprising delay;
//   - the result is never negative;
//   - the result is never above the policy's cap, however large attempt is;
//   - Delay may be called from many goroutines at once.
type Policy interface {
	Delay(attempt int) time.Duration
}

// Bounded is a Policy that can state the range its random delays are drawn
// from. It exists so that retry horizons can be reported (see [Total])
// without sampling.
type Bounded interface {
	Policy
	// Bounds returns the least and greatest value Delay(attempt) can return.
	Bounds(attempt int) (lo, hi time.Duration)
}

// Func adapts a function to a [Policy]. It enforces the contract on the
// function's behalf: attempt < 1 is passed as 1 and a negative result becomes
// 0. The function itself must be safe for concurrent use.
type Func func(attempt int) time.Duration

// Delay calls f with attempt clamped to at least 1 and clamps the result to
// at least 0.
func (f Func) Delay(attempt int) time.Duration {
	return max(f(max(attempt, 1)), 0)
}

// Total returns the least and greatest total time a job waits between its
// attempts when all maxAttempts of them fail: the sum of p.Bounds over
// attempts 1 to maxAttempts-1. The attempts' own run time is not included.
// It answers "how long until a failing job is given up on", which is what a
// retry policy is chosen for. The sums saturate at the largest
// time.Duration rather than wrapping; maxAttempts < 2 gives 0, 0.
func Total(p Bounded, maxAttempts int) (lo, hi time.Duration) {
	for attempt := 1; attempt < maxAttempts; attempt++ {
		l, h := p.Bounds(attempt)
		lo, hi = addSat(lo, l), addSat(hi, h)
		if lo == math.MaxInt64 {
			break // both sums are saturated: hi >= lo
		}
	}
	return lo, hi
}

// addSat adds two durations, treating negatives as 0 and stopping at the
// largest time.Duration instead of overflowing.
func addSat(a, b time.Duration) time.Duration {
	a, b = max(a, 0), max(b, 0)
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
