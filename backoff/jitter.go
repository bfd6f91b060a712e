package backoff

import (
	"math"
	"strconv"
	"time"
)

// Jitter says how a delay d is randomised. Randomising matters for a job
// queue because failures come in herds: when a dependency goes down, every
// job that used it fails within seconds, and without jitter they would all be
// retried together again and again.
//
// The zero value is [EqualJitter], so that the zero [Exponential] is the
// default policy.
type Jitter int

const (
	// EqualJitter draws from [d/2, d]: d/2 plus a uniform share of d/2.
	// It keeps a floor under every delay, so the time until a job is given
	// up on can shrink by at most half.
	EqualJitter Jitter = iota
	// FullJitter draws uniformly from [0, d]. It spreads a herd the most,
	// but any single retry may come almost at once.
	FullJitter
	// NoJitter uses d as it is.
	NoJitter
)

// String returns the constant's name, or Jitter(n) for an unknown value.
func (j Jitter) String() string {
	switch j {
	case EqualJitter:
		return "EqualJitter"
	case FullJitter:
		return "FullJitter"
	case NoJitter:
		return "NoJitter"
	}
	return "Jitter(" + strconv.Itoa(int(j)) + ")"
}

func (j Jitter) valid() bool {
	return j == EqualJitter || j == FullJitter || j == NoJitter
}

// random reports whether j consumes a random number; NoJitter must not, so
// that deterministic policies leave a shared source untouched.
func (j Jitter) random() bool {
	return j == EqualJitter || j == FullJitter
}

// apply jitters the nominal delay d (nanoseconds, 0 <= d <= ceil) with the
// random number r in [0, 1] and converts it to a Duration no larger than
// ceil. An unknown Jitter is treated as NoJitter: Validate reports it, and
// Delay must still keep its contract.
func (j Jitter) apply(d float64, ceil time.Duration, r float64) time.Duration {
	switch j {
	case FullJitter:
		d *= r
	case EqualJitter:
		d = d/2 + d/2*r
	}
	// The float compare comes first because converting a float64 at or
	// above 2^63 to int64 is not defined; rounding (not truncating) keeps
	// results like 0.75 s exact.
	if !(d < float64(ceil)) {
		return ceil
	}
	return min(time.Duration(math.Round(d)), ceil)
}

// clampUnit forces a caller-supplied random number into [0, 1] so that a
// misbehaving source cannot break the Policy contract.
func clampUnit(r float64) float64 {
	if !(r >= 0) { // also NaN
		return 0
	}
	return min(r, 1)
}
