package backoff

import (
	"fmt"
	"time"
)

// Constant is a [Policy] that waits the same time after every attempt. It is
// for kinds whose failures are not caused by load, such as polling an
// external system that is simply not ready yet. Its cap is its own value.
// A negative Constant waits 0.
type Constant time.Duration

// Delay returns c, or 0 if c is negative, whatever the attempt.
func (c Constant) Delay(int) time.Duration {
	return max(time.Duration(c), 0)
}

// Bounds returns Delay twice: a Constant has no jitter.
func (c Constant) Bounds(attempt int) (lo, hi time.Duration) {
	d := c.Delay(attempt)
	return d, d
}

// Validate rejects a negative Constant, which is almost always a sign of a
// miscomputed configuration value.
func (c Constant) Validate() error {
	if c < 0 {
		return fmt.Errorf("backoff: Constant is %v; use zero or a positive duration", time.Duration(c))
	}
	return nil
}
