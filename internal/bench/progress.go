package bench

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// sampler reports how many jobs are done and how many wait.
type sampler func() (done, backlog int64)

// progress writes a line every interval until its stop function is called: elapsed time, jobs done,
// the rate over the last interval, and the backlog.
func progress(w io.Writer, every time.Duration, label string, sample sampler) (stop func()) {
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
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			<-done
		})
	}
}
