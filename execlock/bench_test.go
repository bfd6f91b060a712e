package execlock

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
)

// BenchmarkJobLockCycle measures the Redis side of one keyed job alone, as the dispatcher does it:
// the queue lock taken when the job is claimed, the execution lock taken when it starts, the queue
// lock given back, and the execution lock given back when it ends: four calls per node. Jobs run in
// parallel over distinct keys, so no call waits for another's lock: 16 at a time (GOMAXPROCS x 8
// goroutines here, the queue locks of a small claim pass) and 128 (a dispatcher of 100 workers with
// a claim pass under way). Its jobs/s is the most a
// dispatcher could start and finish with nothing else to do: the ceiling Redis and its client put on
// the unique and slots scenarios of jobpipe bench, with 1 and 3 nodes.
func BenchmarkJobLockCycle(b *testing.B) {
	for _, n := range []int{1, 3} {
		for _, perProc := range []int{8, 64} {
			name := fmt.Sprintf("%d-nodes/%d-at-once", n, perProc*runtime.GOMAXPROCS(0))
			b.Run(name, func(b *testing.B) { benchLockCycle(b, n, perProc) })
		}
	}
}

func benchLockCycle(b *testing.B, n, perProc int) {
	l := setup(b, n, func(c *Config) { c.NodeName = "bench" }).locker
	ctx := context.Background()
	var next atomic.Int64
	b.SetParallelism(perProc)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := strconv.FormatInt(next.Add(1), 10)
			q, err := l.TryQueue(ctx, "bench", key, 0)
			if err != nil {
				b.Error(err)
				return
			}
			x, err := l.TryExec(ctx, "bench", key, 0)
			if err != nil {
				b.Error(err)
				return
			}
			if err := q.Release(ctx); err != nil {
				b.Error(err)
			}
			if err := x.Release(ctx); err != nil {
				b.Error(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}
