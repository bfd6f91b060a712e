package backoff_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/backoff"
)

var (
	_ backoff.Bounded = backoff.Exponential{}
	_ backoff.Bounded = backoff.Constant(0)
	_ backoff.Policy  = backoff.Func(nil)
)

// defaultMaxAttempts is the job kind's default that the package doc's
// figures assume; the kind, not this package, owns the real value.
const defaultMaxAttempts = 25

// fixed returns a random source that always returns r.
func fixed(r float64) func() float64 { return func() float64 { return r } }

// noDraw is a random source for policies that must not consume randomness.
func noDraw() float64 { panic("Rand called by a policy without jitter") }

func TestExponentialNoJitter(t *testing.T) {
	t.Parallel()
	plain := backoff.Exponential{Jitter: backoff.NoJitter, Rand: noDraw}
	tests := []struct {
		name    string
		policy  backoff.Exponential
		attempt int
		want    time.Duration
	}{
		{"first attempt is base", plain, 1, time.Second},
		{"second attempt doubles", plain, 2, 2 * time.Second},
		{"tenth attempt", plain, 10, 512 * time.Second},
		{"last attempt below cap", plain, 15, 16384 * time.Second},
		{"cap reached", plain, 16, 6 * time.Hour},
		{"cap held", plain, 24, 6 * time.Hour},
		{"cap held far out", plain, 1000, 6 * time.Hour},
		{"attempt zero is attempt one", plain, 0, time.Second},
		{"negative attempt is attempt one", plain, -7, time.Second},
		{"min int attempt is attempt one", plain, math.MinInt, time.Second},
		{"custom base, factor and cap", backoff.Exponential{Base: 100 * time.Millisecond, Factor: 1.5, Cap: time.Second, Jitter: backoff.NoJitter}, 3, 225 * time.Millisecond},
		{"custom cap reached", backoff.Exponential{Base: 100 * time.Millisecond, Factor: 1.5, Cap: time.Second, Jitter: backoff.NoJitter}, 7, time.Second},
		{"factor one keeps base", backoff.Exponential{Base: time.Minute, Factor: 1, Jitter: backoff.NoJitter}, 50, time.Minute},
		{"cap equal to base", backoff.Exponential{Base: time.Minute, Cap: time.Minute, Jitter: backoff.NoJitter}, 3, time.Minute},
		{"unknown jitter acts as none", backoff.Exponential{Jitter: backoff.Jitter(7), Rand: noDraw}, 3, 4 * time.Second},
		// Invalid fields still keep the contract: never negative, never above the cap.
		{"negative base gives zero", backoff.Exponential{Base: -time.Second, Jitter: backoff.NoJitter}, 3, 0},
		{"negative cap gives zero", backoff.Exponential{Cap: -time.Second, Jitter: backoff.NoJitter}, 3, 0},
		{"negative factor gives zero", backoff.Exponential{Factor: -2, Jitter: backoff.NoJitter}, 2, 0},
		{"NaN factor gives cap", backoff.Exponential{Factor: math.NaN(), Jitter: backoff.NoJitter}, 2, 6 * time.Hour},
		{"cap below base gives cap", backoff.Exponential{Base: time.Hour, Cap: time.Minute, Jitter: backoff.NoJitter}, 1, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.policy.Delay(tt.attempt); got != tt.want {
				t.Errorf("Delay(%d) = %v, want %v", tt.attempt, got, tt.want)
			}
			if lo, hi := tt.policy.Bounds(tt.attempt); lo != tt.want || hi != tt.want {
				t.Errorf("Bounds(%d) = %v, %v, want %v twice", tt.attempt, lo, hi, tt.want)
			}
		})
	}
}

func TestExponentialJitter(t *testing.T) {
	t.Parallel()
	const huge = 1_000_000_000 // far past the cap: d is the 6h cap
	tests := []struct {
		name    string
		jitter  backoff.Jitter
		r       float64
		attempt int
		want    time.Duration
	}{
		{"full r=0", backoff.FullJitter, 0, 1, 0},
		{"full r=0.5", backoff.FullJitter, 0.5, 1, 500 * time.Millisecond},
		{"full r=0.999999", backoff.FullJitter, 0.999999, 1, 999999 * time.Microsecond},
		{"equal r=0", backoff.EqualJitter, 0, 1, 500 * time.Millisecond},
		{"equal r=0.5", backoff.EqualJitter, 0.5, 1, 750 * time.Millisecond},
		{"equal r=0.999999", backoff.EqualJitter, 0.999999, 1, 999999500 * time.Nanosecond},
		{"full at cap r=0", backoff.FullJitter, 0, huge, 0},
		{"full at cap r=0.5", backoff.FullJitter, 0.5, huge, 3 * time.Hour},
		{"full at cap r=0.999999", backoff.FullJitter, 0.999999, huge, 6*time.Hour - 21600*time.Microsecond},
		{"equal at cap r=0", backoff.EqualJitter, 0, huge, 3 * time.Hour},
		{"equal at cap r=0.5", backoff.EqualJitter, 0.5, huge, 4*time.Hour + 30*time.Minute},
		{"equal at cap r=0.999999", backoff.EqualJitter, 0.999999, huge, 6*time.Hour - 10800*time.Microsecond},
		// A source outside [0, 1) is clamped rather than allowed to break the contract.
		{"full r=1 gives d", backoff.FullJitter, 1, 1, time.Second},
		{"full r above 1 gives d", backoff.FullJitter, 1.5, 1, time.Second},
		{"equal r above 1 gives d", backoff.EqualJitter, 7, huge, 6 * time.Hour},
		{"full negative r gives 0", backoff.FullJitter, -0.3, 1, 0},
		{"equal negative r gives d/2", backoff.EqualJitter, -0.3, 1, 500 * time.Millisecond},
		{"equal NaN r gives d/2", backoff.EqualJitter, math.NaN(), 1, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := backoff.Exponential{Jitter: tt.jitter, Rand: fixed(tt.r)}
			if got := p.Delay(tt.attempt); got != tt.want {
				t.Errorf("Delay(%d) with r=%v = %v, want %v", tt.attempt, tt.r, got, tt.want)
			}
		})
	}
}

func TestExponentialBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		jitter  backoff.Jitter
		attempt int
		lo, hi  time.Duration
	}{
		{"equal first", backoff.EqualJitter, 1, 500 * time.Millisecond, time.Second},
		{"equal tenth", backoff.EqualJitter, 10, 256 * time.Second, 512 * time.Second},
		{"equal at cap", backoff.EqualJitter, 40, 3 * time.Hour, 6 * time.Hour},
		{"full first", backoff.FullJitter, 1, 0, time.Second},
		{"full at cap", backoff.FullJitter, 40, 0, 6 * time.Hour},
		{"none tenth", backoff.NoJitter, 10, 512 * time.Second, 512 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lo, hi := backoff.Exponential{Jitter: tt.jitter, Rand: noDraw}.Bounds(tt.attempt)
			if lo != tt.lo || hi != tt.hi {
				t.Errorf("Bounds(%d) = %v, %v, want %v, %v", tt.attempt, lo, hi, tt.lo, tt.hi)
			}
		})
	}
}

func TestExponentialOverflow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		policy  backoff.Exponential
		attempt int
	}{
		{"default at 64", backoff.Exponential{}, 64},
		{"default at 1e9", backoff.Exponential{}, 1_000_000_000},
		{"default at max int", backoff.Exponential{}, math.MaxInt},
		{"factor 10 at 1e9", backoff.Exponential{Factor: 10, Cap: time.Hour}, 1_000_000_000},
		{"tiny factor at 1e9", backoff.Exponential{Factor: 1.0000001, Cap: 24 * time.Hour}, 1_000_000_000},
		{"largest cap at 1e9", backoff.Exponential{Cap: math.MaxInt64}, 1_000_000_000},
		{"largest base and cap at 2", backoff.Exponential{Base: math.MaxInt64, Cap: math.MaxInt64}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ceil := tt.policy.Cap
			if ceil == 0 {
				ceil = backoff.DefaultCap
			}
			none := tt.policy
			none.Jitter = backoff.NoJitter
			if got := none.Delay(tt.attempt); got != ceil {
				t.Errorf("NoJitter Delay(%d) = %v, want the cap %v", tt.attempt, got, ceil)
			}
			for _, j := range []backoff.Jitter{backoff.FullJitter, backoff.EqualJitter} {
				for _, r := range []float64{0, 0.5, 0.999999, 1} {
					p := tt.policy
					p.Jitter, p.Rand = j, fixed(r)
					if got := p.Delay(tt.attempt); got < 0 || got > ceil {
						t.Errorf("%v Delay(%d) with r=%v = %v, want within [0, %v]", j, tt.attempt, r, got, ceil)
					}
				}
			}
		})
	}
}

func TestExponentialValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy backoff.Exponential
		want   string // "" for valid
	}{
		{"zero value", backoff.Exponential{}, ""},
		{"default", backoff.Default(), ""},
		{"factor one", backoff.Exponential{Factor: 1}, ""},
		{"cap equal to base", backoff.Exponential{Base: time.Minute, Cap: time.Minute}, ""},
		{"full jitter", backoff.Exponential{Jitter: backoff.FullJitter}, ""},
		{"no jitter", backoff.Exponential{Jitter: backoff.NoJitter}, ""},
		{
			"negative base", backoff.Exponential{Base: -time.Second},
			"backoff: Exponential.Base is -1s; use a positive duration, or zero for the default 1s",
		},
		{
			"factor below one", backoff.Exponential{Factor: 0.5},
			"backoff: Exponential.Factor is 0.5; use a finite factor of at least 1 (1 keeps the delay at Base), or zero for the default 2",
		},
		{
			"negative factor", backoff.Exponential{Factor: -2},
			"backoff: Exponential.Factor is -2; use a finite factor of at least 1 (1 keeps the delay at Base), or zero for the default 2",
		},
		{
			"NaN factor", backoff.Exponential{Factor: math.NaN()},
			"backoff: Exponential.Factor is NaN; use a finite factor of at least 1 (1 keeps the delay at Base), or zero for the default 2",
		},
		{
			"infinite factor", backoff.Exponential{Factor: math.Inf(1)},
			"backoff: Exponential.Factor is +Inf; use a finite factor of at least 1 (1 keeps the delay at Base), or zero for the default 2",
		},
		{
			"negative cap", backoff.Exponential{Cap: -time.Hour},
			"backoff: Exponential.Cap is -1h0m0s; use a positive duration, or zero for the default 6h0m0s",
		},
		{
			"cap below base", backoff.Exponential{Base: 5 * time.Minute, Cap: time.Minute},
			"backoff: Exponential.Cap 1m0s is below Base 5m0s; set Cap to at least Base",
		},
		{
			"cap below default base", backoff.Exponential{Cap: 500 * time.Millisecond},
			"backoff: Exponential.Cap 500ms is below Base 1s (the default, as it is zero); set Cap to at least Base",
		},
		{
			"default cap below base", backoff.Exponential{Base: 12 * time.Hour},
			"backoff: Exponential.Cap 6h0m0s (the default, as it is zero) is below Base 12h0m0s; set Cap to at least Base",
		},
		{
			"unknown jitter", backoff.Exponential{Jitter: backoff.Jitter(7)},
			"backoff: Exponential.Jitter is Jitter(7); use EqualJitter, FullJitter or NoJitter",
		},
		{
			"every problem reported", backoff.Exponential{Base: -time.Second, Factor: 0.5, Cap: -time.Hour, Jitter: -1},
			"backoff: Exponential.Base is -1s; use a positive duration, or zero for the default 1s\n" +
				"backoff: Exponential.Factor is 0.5; use a finite factor of at least 1 (1 keeps the delay at Base), or zero for the default 2\n" +
				"backoff: Exponential.Cap is -1h0m0s; use a positive duration, or zero for the default 6h0m0s\n" +
				"backoff: Exponential.Jitter is Jitter(-1); use EqualJitter, FullJitter or NoJitter",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkErr(t, tt.policy.Validate(), tt.want)
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("Validate() = %q, want nil", err)
	case want != "" && err == nil:
		t.Errorf("Validate() = nil, want %q", want)
	case want != "" && err.Error() != want:
		t.Errorf("Validate() =\n%s\nwant\n%s", err, want)
	}
}

func TestJitterString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		j    backoff.Jitter
		want string
	}{
		{"zero value", 0, "EqualJitter"},
		{"equal", backoff.EqualJitter, "EqualJitter"},
		{"full", backoff.FullJitter, "FullJitter"},
		{"none", backoff.NoJitter, "NoJitter"},
		{"unknown", backoff.Jitter(42), "Jitter(42)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.j.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConstant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		c       backoff.Constant
		attempt int
		want    time.Duration
		wantErr string
	}{
		{"first attempt", backoff.Constant(30 * time.Second), 1, 30 * time.Second, ""},
		{"late attempt", backoff.Constant(30 * time.Second), 1_000_000_000, 30 * time.Second, ""},
		{"attempt zero", backoff.Constant(30 * time.Second), 0, 30 * time.Second, ""},
		{"zero", backoff.Constant(0), 3, 0, ""},
		{"largest", backoff.Constant(math.MaxInt64), 3, math.MaxInt64, ""},
		{"negative gives zero", backoff.Constant(-time.Second), 3, 0, "backoff: Constant is -1s; use zero or a positive duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.c.Delay(tt.attempt); got != tt.want {
				t.Errorf("Delay(%d) = %v, want %v", tt.attempt, got, tt.want)
			}
			if lo, hi := tt.c.Bounds(tt.attempt); lo != tt.want || hi != tt.want {
				t.Errorf("Bounds(%d) = %v, %v, want %v twice", tt.attempt, lo, hi, tt.want)
			}
			checkErr(t, tt.c.Validate(), tt.wantErr)
		})
	}
}

func TestFunc(t *testing.T) {
	t.Parallel()
	echo := backoff.Func(func(attempt int) time.Duration { return time.Duration(attempt) * time.Second })
	tests := []struct {
		name    string
		f       backoff.Func
		attempt int
		want    time.Duration
	}{
		{"passes attempt", echo, 3, 3 * time.Second},
		{"attempt zero passed as one", echo, 0, time.Second},
		{"negative attempt passed as one", echo, -4, time.Second},
		{"negative result clamped", func(int) time.Duration { return -time.Minute }, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.f.Delay(tt.attempt); got != tt.want {
				t.Errorf("Delay(%d) = %v, want %v", tt.attempt, got, tt.want)
			}
		})
	}
}

func TestTotal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		policy      backoff.Bounded
		maxAttempts int
		lo, hi      time.Duration
	}{
		{"constant over 25 attempts", backoff.Constant(time.Second), 25, 24 * time.Second, 24 * time.Second},
		{"single attempt has no delay", backoff.Constant(time.Second), 1, 0, 0},
		{"zero attempts", backoff.Constant(time.Second), 0, 0, 0},
		{"negative attempts", backoff.Constant(time.Second), -3, 0, 0},
		{"exponential no jitter", backoff.Exponential{Cap: 4 * time.Second, Jitter: backoff.NoJitter}, 6, 15 * time.Second, 15 * time.Second},
		{"exponential full jitter", backoff.Exponential{Jitter: backoff.FullJitter}, 5, 0, 15 * time.Second},
		{"exponential equal jitter", backoff.Exponential{}, 5, 7500 * time.Millisecond, 15 * time.Second},
		{"saturates instead of wrapping", backoff.Constant(math.MaxInt64 / 2), 4, math.MaxInt64, math.MaxInt64},
		{"huge attempt count saturates quickly", backoff.Default(), math.MaxInt, math.MaxInt64, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if lo, hi := backoff.Total(tt.policy, tt.maxAttempts); lo != tt.lo || hi != tt.hi {
				t.Errorf("Total(%d) = %v, %v, want %v, %v", tt.maxAttempts, lo, hi, tt.lo, tt.hi)
			}
		})
	}
}

// TestJitterDistribution checks that the jittered delays are uniform over
// the documented range, with a seeded source so the test is repeatable.
func TestJitterDistribution(t *testing.T) {
	t.Parallel()
	const samples = 100_000
	tests := []struct {
		name     string
		jitter   backoff.Jitter
		attempt  int
		wantMean float64 // as a fraction of the nominal delay
	}{
		{"full first attempt", backoff.FullJitter, 1, 0.5},
		{"full at cap", backoff.FullJitter, 30, 0.5},
		{"equal first attempt", backoff.EqualJitter, 1, 0.75},
		{"equal at cap", backoff.EqualJitter, 30, 0.75},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := rand.New(rand.NewPCG(1, 2))
			p := backoff.Exponential{Jitter: tt.jitter, Rand: src.Float64}
			_, d := backoff.Exponential{Jitter: backoff.NoJitter}.Bounds(tt.attempt)
			lo, hi := p.Bounds(tt.attempt)
			var sum float64
			for range samples {
				got := p.Delay(tt.attempt)
				if got < lo || got > hi {
					t.Fatalf("Delay(%d) = %v, outside Bounds %v to %v", tt.attempt, got, lo, hi)
				}
				sum += float64(got)
			}
			mean, want := sum/samples, tt.wantMean*float64(d)
			if math.Abs(mean-want) > 0.01*want {
				t.Errorf("mean delay = %v, want within 1%% of %v", time.Duration(mean), time.Duration(want))
			}
		})
	}
}

func TestDefault(t *testing.T) {
	t.Parallel()
	got := backoff.Default()
	want := backoff.Exponential{Base: time.Second, Factor: 2, Cap: 6 * time.Hour, Jitter: backoff.EqualJitter}
	if got.Base != want.Base || got.Factor != want.Factor || got.Cap != want.Cap || got.Jitter != want.Jitter || got.Rand != nil {
		t.Errorf("Default() = %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
	// The zero Exponential is documented to be the default policy.
	for attempt := 1; attempt <= 30; attempt++ {
		for _, r := range []float64{0, 0.25, 0.999999} {
			d, z := backoff.Default(), backoff.Exponential{}
			d.Rand, z.Rand = fixed(r), fixed(r)
			if d.Delay(attempt) != z.Delay(attempt) {
				t.Errorf("attempt %d, r=%v: Default() gives %v, zero Exponential gives %v", attempt, r, d.Delay(attempt), z.Delay(attempt))
			}
		}
	}
	changed := backoff.Default()
	changed.Cap = time.Minute
	if backoff.Default().Cap != 6*time.Hour {
		t.Error("changing one Default() value changed the next")
	}
}

// TestDefaultConcurrent shares one policy with a nil Rand between
// goroutines; run with -race it checks that Delay is safe for concurrent use.
func TestDefaultConcurrent(t *testing.T) {
	t.Parallel()
	p := backoff.Default()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				attempt := 1 + (g+i)%30
				lo, hi := p.Bounds(attempt)
				if got := p.Delay(attempt); got < lo || got > hi {
					t.Errorf("Delay(%d) = %v, outside %v to %v", attempt, got, lo, hi)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestDocFigures recomputes every figure the package doc states, so the doc
// cannot drift from the code.
func TestDocFigures(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var comment []string
	for line := range strings.Lines(string(src)) {
		if text, ok := strings.CutPrefix(line, "//"); ok {
			comment = append(comment, text)
		}
	}
	doc := strings.Join(strings.Fields(strings.Join(comment, " ")), " ")

	p := backoff.Default()
	bounds := func(attempt int) string {
		lo, hi := p.Bounds(attempt)
		return fmt.Sprintf("%v to %v", lo, hi)
	}
	lo, hi := backoff.Total(p, defaultMaxAttempts)
	days := func(d time.Duration) float64 { return d.Hours() / 24 }
	capLo, capHi := p.Bounds(16)
	oneHourLo, oneHourHi := backoff.Total(backoff.Exponential{Cap: time.Hour}, defaultMaxAttempts)
	transientLo, transientHi := backoff.Total(p, 5)
	var river, riverLast time.Duration
	for attempt := 1; attempt < defaultMaxAttempts; attempt++ {
		riverLast = time.Duration(attempt*attempt*attempt*attempt) * time.Second
		river += riverLast
	}

	// The cap is first reached at attempt 16 and held from there.
	if _, hi15 := p.Bounds(15); hi15 >= backoff.DefaultCap {
		t.Errorf("attempt 15 already reaches the cap: %v", hi15)
	}
	for _, attempt := range []int{16, 24, 1_000_000_000} {
		if l, h := p.Bounds(attempt); l != capLo || h != capHi || h != backoff.DefaultCap {
			t.Errorf("attempt %d: %v to %v, want the cap range %v to %v", attempt, l, h, capLo, backoff.DefaultCap)
		}
	}

	want := []string{
		"base 1s, factor 2, cap 6h",
		fmt.Sprintf("default of %d max attempts, so %d delays", defaultMaxAttempts, defaultMaxAttempts-1),
		"attempt 1: " + bounds(1),
		"attempt 5: " + bounds(5),
		"attempt 10: " + bounds(10),
		"attempt 15: " + bounds(15),
		"attempt 16 onward: " + bounds(16),
		fmt.Sprintf("all %d delays: %v to %v (about %.1f to %.1f days)", defaultMaxAttempts-1, lo, hi, days(lo), days(hi)),
		fmt.Sprintf("%v on average", (lo+hi)/2),
		fmt.Sprintf("four retries in the first %v to %v", transientLo, transientHi),
		fmt.Sprintf("at most %v", backoff.DefaultCap),
		fmt.Sprintf("sum to about %v (%.1f days)", river, days(river)),
		fmt.Sprintf("the last one alone is %v", riverLast),
		fmt.Sprintf("only %v to %v of failures", oneHourLo, oneHourHi),
		fmt.Sprintf("outlasts at least %v", lo),
		fmt.Sprintf("each extra attempt adds %v to %v", capLo, capHi),
	}
	for _, w := range want {
		if !strings.Contains(doc, w) {
			t.Errorf("package doc does not say %q", w)
		}
	}
}
