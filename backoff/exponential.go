package backoff

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Defaults used by [Default] and by the zero fields of an [Exponential].
// Package doc explains why these values were chosen.
const (
	DefaultBase   = time.Second
	DefaultFactor = 2.0
	DefaultCap    = 6 * time.Hour
)

// Exponential is a [Policy] whose delay grows by Factor with each attempt
// until it reaches Cap, then is randomised by Jitter:
//
//	d = min(Cap, Base * Factor^(attempt-1)), then jittered.
//
// Zero fields take the defaults, so the zero Exponential is the same policy
// as [Default]. An Exponential is safe for concurrent use if its Rand is
// (nil is). Call [Exponential.Validate] where the policy is configured; Delay
// cannot return an error, so for invalid fields it still keeps the [Policy]
// contract but the delays may not be what was meant.
type Exponential struct {
	// Base is the delay after the first attempt, before jitter.
	// Zero means DefaultBase (1s).
	Base time.Duration
	// Factor multiplies the delay after each further attempt. It must be
	// at least 1; 1 keeps the delay at Base. Zero means DefaultFactor (2).
	Factor float64
	// Cap is the largest delay, before and after jitter. It must be at
	// least Base. Zero means DefaultCap (6h).
	Cap time.Duration
	// Jitter randomises the delay. The zero value is EqualJitter.
	Jitter Jitter
	// Rand returns a random number in [0, 1); values outside are clamped.
	// It lets tests make jittered delays deterministic. It must be safe for
	// concurrent use if the policy is shared. Nil means math/rand/v2's
	// Float64, which is.
	Rand func() float64
}

// Default returns jobpipe's default retry policy: base 1s, factor 2, cap 6h,
// equal jitter. Each call returns a fresh value, so callers may change its
// fields without affecting anyone else.
func Default() Exponential {
	return Exponential{Base: DefaultBase, Factor: DefaultFactor, Cap: DefaultCap, Jitter: EqualJitter}
}

// Delay returns the jittered delay after the given attempt; see [Policy] for
// the contract.
func (e Exponential) Delay(attempt int) time.Duration {
	d, ceil := e.nominal(attempt)
	r := 0.0
	if e.Jitter.random() {
		if e.Rand != nil {
			r = clampUnit(e.Rand())
		} else {
			r = rand.Float64()
		}
	}
	return e.Jitter.apply(d, ceil, r)
}

// Bounds returns the least and greatest value Delay(attempt) can return.
func (e Exponential) Bounds(attempt int) (lo, hi time.Duration) {
	d, ceil := e.nominal(attempt)
	return e.Jitter.apply(d, ceil, 0), e.Jitter.apply(d, ceil, 1)
}

// nominal returns the delay before jitter, in nanoseconds, and the cap it is
// held under. The arithmetic is in float64 because Base*Factor^(attempt-1)
// leaves the int64 range within a few dozen attempts; math.Pow then returns
// +Inf, which the comparison with the cap turns into the cap, so a huge
// attempt number gives Cap rather than a wrapped duration.
func (e Exponential) nominal(attempt int) (d float64, ceil time.Duration) {
	base, factor, ceil := e.effective()
	ceil = max(ceil, 0)
	if base <= 0 || ceil == 0 {
		return 0, ceil
	}
	d = float64(base) * math.Pow(factor, float64(max(attempt, 1)-1))
	switch {
	case !(d < float64(ceil)): // also +Inf and NaN
		return float64(ceil), ceil
	case d < 0: // a negative Factor, which Validate rejects
		return 0, ceil
	}
	return d, ceil
}

// effective returns the fields with zero values replaced by the defaults.
func (e Exponential) effective() (base time.Duration, factor float64, ceil time.Duration) {
	base, factor, ceil = e.Base, e.Factor, e.Cap
	if base == 0 {
		base = DefaultBase
	}
	if factor == 0 {
		factor = DefaultFactor
	}
	if ceil == 0 {
		ceil = DefaultCap
	}
	return base, factor, ceil
}

// Validate reports every field that is out of range, each as its own
// "backoff: " error joined with [errors.Join], saying what to use instead.
func (e Exponential) Validate() error {
	var errs []error
	if e.Base < 0 {
		errs = append(errs, fmt.Errorf("backoff: Exponential.Base is %v; use a positive duration, or zero for the default %v", e.Base, DefaultBase))
	}
	if e.Factor != 0 && (!(e.Factor >= 1) || math.IsInf(e.Factor, 1)) {
		errs = append(errs, fmt.Errorf("backoff: Exponential.Factor is %v; use a finite factor of at least 1 (1 keeps the delay at Base), or zero for the default %v", e.Factor, DefaultFactor))
	}
	if e.Cap < 0 {
		errs = append(errs, fmt.Errorf("backoff: Exponential.Cap is %v; use a positive duration, or zero for the default %v", e.Cap, DefaultCap))
	}
	if base, _, ceil := e.effective(); e.Base >= 0 && e.Cap >= 0 && ceil < base {
		errs = append(errs, fmt.Errorf("backoff: Exponential.Cap %s is below Base %s; set Cap to at least Base",
			describe(e.Cap, ceil), describe(e.Base, base)))
	}
	if !e.Jitter.valid() {
		errs = append(errs, fmt.Errorf("backoff: Exponential.Jitter is %v; use EqualJitter, FullJitter or NoJitter", e.Jitter))
	}
	return errors.Join(errs...)
}

// describe names a field's value, pointing out when it came from a default,
// because "Cap 6h0m0s is below Base" is baffling to someone who never set Cap.
func describe(set, effective time.Duration) string {
	if set == 0 {
		return fmt.Sprintf("%v (the default, as it is zero)", effective)
	}
	return effective.String()
}
