package dispatcher_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

// benchKind creates kind's table in a fresh schema.
func benchKind[T any](b *testing.B, kind *jobinfo.Kind[T]) *testenv.Schema {
	b.Helper()
	s := testenv.NewSchema(b)
	ctx := context.Background()
	if err := migrations.Up(ctx, s.Pool); err != nil {
		b.Fatal(err)
	}
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, ddl); err != nil {
		b.Fatal(err)
	}
	return s
}

type uniqueJob struct {
	N    int64  `jobpipe:"n,unique"`
	Note string `jobpipe:"note"`
}

// BenchmarkEnqueueMany measures bulk enqueue in batches of 1,000; rows/s is the figure to read.
func BenchmarkEnqueueMany(b *testing.B) {
	b.Run("plain-copy", func(b *testing.B) {
		benchEnqueueMany(b, jobinfo.MustDefine[plainJob]("bench_plain"), func(n int64) plainJob { return plainJob{N: n, Note: "bench"} })
	})
	b.Run("unique-batch", func(b *testing.B) {
		benchEnqueueMany(b, jobinfo.MustDefine[uniqueJob]("bench_unique", jobinfo.NoKey()), func(n int64) uniqueJob { return uniqueJob{N: n, Note: "bench"} })
	})
}

func benchEnqueueMany[T any](b *testing.B, kind *jobinfo.Kind[T], job func(n int64) T) {
	s := benchKind(b, kind)
	ctx := context.Background()
	jobs := make([]T, 1000)
	next := int64(0)
	for b.Loop() {
		for i := range jobs {
			next++
			jobs[i] = job(next)
		}
		if _, err := dispatcher.EnqueueMany(ctx, s.Pool, kind, jobs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(jobs))/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkEnqueue measures one job per round trip.
func BenchmarkEnqueue(b *testing.B) {
	kind := jobinfo.MustDefine[plainJob]("bench_one")
	s := benchKind(b, kind)
	ctx := context.Background()
	for b.Loop() {
		if _, err := dispatcher.Enqueue(ctx, s.Pool, kind, plainJob{N: 1, Note: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkEnqueueParallel measures one job per call from 32 concurrent callers sharing a pool, as
// web request handlers enqueue: their commits, and the notifications that wake the dispatchers.
func BenchmarkEnqueueParallel(b *testing.B) {
	kind := jobinfo.MustDefine[plainJob]("bench_one_parallel")
	s := benchKind(b, kind)
	ctx := context.Background()
	b.SetParallelism(32 / max(1, runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := dispatcher.Enqueue(ctx, s.Pool, kind, plainJob{N: 1, Note: "bench"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
