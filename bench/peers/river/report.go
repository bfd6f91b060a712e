package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// report is what a run measured: the settings, the RESULT pairs in order and the failures.
type report struct {
	started  time.Time
	settings []pair
	results  []pair
	failures []string
}

type pair struct {
	key   string
	value any
}

func (r *report) setting(key string, value any) { r.settings = append(r.settings, pair{key, value}) }
func (r *report) result(key string, value any)  { r.results = append(r.results, pair{key, value}) }

func (r *report) fail(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// print writes the settings, the failures and, last, the RESULT line, as jobpipe bench does.
func (r *report) print(w io.Writer) {
	fmt.Fprintln(w, "\nsettings")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  setting\tvalue")
	for _, p := range r.settings {
		fmt.Fprintf(tw, "  %s\t%s\n", p.key, format(p.value))
	}
	tw.Flush()
	for _, f := range r.failures {
		fmt.Fprintf(w, "FAILED: %s\n", f)
	}
	var b strings.Builder
	b.WriteString("RESULT")
	for _, p := range r.results {
		fmt.Fprintf(&b, " %s=%s", p.key, strings.ReplaceAll(format(p.value), " ", "_"))
	}
	fmt.Fprintln(w, b.String())
}

// format writes floats without exponent.
func format(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// round rounds x to the given number of decimals.
func round(x float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(x*p) / p
}

// rate is n per second over d, rounded to a whole number, as jobpipe reports jobs_per_s.
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return math.Round(float64(n) / d.Seconds())
}

// progress writes a line every interval until its stop function is called, in jobpipe bench's
// format: elapsed time, jobs done, the rate over the last interval, and the backlog.
func progress(w io.Writer, every time.Duration, label string, sample func() (done, backlog int64)) (stop func()) {
	if every <= 0 {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		start, last, lastAt := time.Now(), int64(0), time.Now()
		for {
			select {
			case <-quit:
				return
			case now := <-t.C:
				n, backlog := sample()
				fmt.Fprintf(w, "%-14s %6.1fs  done %9d  rate %7.0f/s  backlog %9d\n",
					label, now.Sub(start).Seconds(), n, float64(n-last)/now.Sub(lastAt).Seconds(), backlog)
				last, lastAt = n, now
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
