package backoff_test

import (
	"fmt"
	"time"

	"github.com/jobpipe/jobpipe/backoff"
)

func ExampleExponential() {
	p := backoff.Exponential{
		Base:   100 * time.Millisecond,
		Factor: 3,
		Cap:    10 * time.Second,
		Jitter: backoff.EqualJitter,
		// A fixed source makes the jitter repeatable; 0.5 lands at 3/4 of
		// each delay. Leave Rand nil in production.
		Rand: func() float64 { return 0.5 },
	}
	if err := p.Validate(); err != nil {
		panic(err)
	}
	for attempt := 1; attempt <= 6; attempt++ {
		lo, hi := p.Bounds(attempt)
		fmt.Printf("attempt %d: %v (range %v to %v)\n", attempt, p.Delay(attempt), lo, hi)
	}
	// Output:
	// attempt 1: 75ms (range 50ms to 100ms)
	// attempt 2: 225ms (range 150ms to 300ms)
	// attempt 3: 675ms (range 450ms to 900ms)
	// attempt 4: 2.025s (range 1.35s to 2.7s)
	// attempt 5: 6.075s (range 4.05s to 8.1s)
	// attempt 6: 7.5s (range 5s to 10s)
}

func ExampleExponential_Validate() {
	p := backoff.Exponential{Base: 5 * time.Minute, Cap: time.Minute}
	fmt.Println(p.Validate())
	// Output:
	// backoff: Exponential.Cap 1m0s is below Base 5m0s; set Cap to at least Base
}

func ExampleConstant() {
	p := backoff.Constant(30 * time.Second)
	fmt.Println(p.Delay(1), p.Delay(100))
	// Output:
	// 30s 30s
}

func ExampleFunc() {
	// Linear backoff: one more minute per attempt made, at most ten.
	p := backoff.Func(func(attempt int) time.Duration {
		return time.Duration(min(attempt, 10)) * time.Minute
	})
	fmt.Println(p.Delay(1), p.Delay(3), p.Delay(50), p.Delay(0))
	// Output:
	// 1m0s 3m0s 10m0s 1m0s
}

func ExampleDefault() {
	p := backoff.Default()
	for _, attempt := range []int{1, 2, 3, 10, 16, 24} {
		lo, hi := p.Bounds(attempt)
		fmt.Printf("after attempt %d: %v to %v\n", attempt, lo, hi)
	}
	lo, hi := backoff.Total(p, 25)
	fmt.Printf("all 24 delays: %v to %v\n", lo, hi)
	// Output:
	// after attempt 1: 500ms to 1s
	// after attempt 2: 1s to 2s
	// after attempt 3: 2s to 4s
	// after attempt 10: 4m16s to 8m32s
	// after attempt 16: 3h0m0s to 6h0m0s
	// after attempt 24: 3h0m0s to 6h0m0s
	// all 24 delays: 31h33m3.5s to 63h6m7s
}

func ExampleTotal() {
	lo, hi := backoff.Total(backoff.Exponential{Cap: time.Hour}, 25)
	fmt.Printf("with a 1h cap, 25 attempts span %v to %v of waiting\n", lo, hi)
	// Output:
	// with a 1h cap, 25 attempts span 6h34m7.5s to 13h8m15s of waiting
}
