package execlock

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/jobpipe/jobpipe/internal/testenv"
)

// BenchmarkJobLockCycle measures the Redis side of one keyed job alone, as the dispatcher does it:
// the queue lock taken when the job is claimed, the execution lock taken when it starts, the queue
// lock given back, and the execution lock given back when it ends: four calls per node. Jobs run in
// parallel (GOMAXPROCS x 8 goroutines: 16 here, as many as a dispatcher's claim pass takes queue locks at once) over distinct keys, so no call
// waits for another's lock. Its jobs/s is the most a dispatcher could start and finish with nothing
// else to do: the ceiling Redis and its client put on the unique and slots scenarios of
// jobpipe bench, with 1 and 3 nodes.
func BenchmarkJobLockCycle(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(strconv.Itoa(n)+"-nodes", func(b *testing.B) {
			nodes := testenv.StartRedisNodes(b, n)
			addrs := make([]string, n)
			for i, nd := range nodes {
				addrs[i] = nd.Addr
			}
			clients, err := NewClients(addrs...)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = closeAll(clients) })
			l, err := New(&Config{Nodes: clients, NodeName: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(l.Close)
			ctx := context.Background()
			var next atomic.Int64
			b.SetParallelism(8)
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
		})
	}
}
