package faultkit

// A steady offered load: jobs enqueued at a fixed rate from a goroutine of their own, their ids kept.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// IDs collects the ids of enqueued jobs, safe for concurrent use.
type IDs struct {
	mu  sync.Mutex
	ids []int64
}

// Add records ids.
func (s *IDs) Add(ids ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, ids...)
}

// All returns the ids recorded so far.
func (s *IDs) All() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids)
}

// enqueueRecorded enqueues jobs of kind, retrying while the shared server refuses connections, adds their
// ids to into and returns them.
func enqueueRecorded[T any](ctx context.Context, db *pgxpool.Pool, kind *jobinfo.Kind[T], jobs []T, into *IDs) ([]int64, error) {
	var ids []int64
	err := retryUnsent(ctx, func() error {
		res, err := dispatcher.EnqueueMany(ctx, db, kind, jobs)
		if err != nil {
			return err
		}
		ids = ids[:0]
		for i, r := range res {
			if r.Err != nil || r.Duplicate {
				return fmt.Errorf("enqueue %+v: %+v", jobs[i], r)
			}
			ids = append(ids, r.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	into.Add(ids...)
	return ids, nil
}

// StartSteadyLoad offers load at a steady rate: every 20 ms it calls enqueue(ctx, first, n) with the jobs
// due at rate per second since it began (first numbers them from 0 on), catching up after a late
// tick. stop ends it, after the enqueue under way (an enqueue is never cancelled, so that every job
// committed is one recorded), and returns how many jobs it enqueued; a failed enqueue fails t and
// stops it.
func StartSteadyLoad(t *testing.T, rate float64, enqueue func(ctx context.Context, first, n int) error) (stop func() int) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan struct{})
	sent := 0
	go func() {
		defer close(done)
		began := time.Now()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			due := int(time.Since(began).Seconds() * rate)
			if due <= sent {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := enqueue(ctx, sent, due-sent)
			cancel()
			if err != nil {
				t.Errorf("steady load: %v", err)
				return
			}
			sent = due
		}
	}()
	var once sync.Once
	stop = func() int {
		once.Do(func() {
			close(quit)
			<-done
		})
		return sent
	}
	t.Cleanup(func() { stop() })
	return stop
}

// KeyedJobs returns an enqueue for StartSteadyLoad of e's keyed kind over blogs firstBlog to
// firstBlog+blogs-1, seq numbers rising per blog, recorded in ids.
func KeyedJobs(e *World, firstBlog, blogs int, ids *IDs) func(ctx context.Context, first, n int) error {
	return func(ctx context.Context, first, n int) error {
		jobs := make([]KeyedJob, n)
		for i := range jobs {
			k := first + i
			jobs[i] = KeyedJob{BlogID: int64(firstBlog + k%blogs), Seq: int64(k / blogs)}
		}
		_, err := enqueueRecorded(ctx, e.DB, e.Kind, jobs, ids)
		return err
	}
}

// plainBlogBase is where the plain kinds' blog ids start, far from the keyed kind's, so that mp_conc
// (counted per blog whatever the kind) keeps the keyed kind's counts apart.
const plainBlogBase = 1_000_000

// PlainJobs returns an enqueue for StartSteadyLoad of a plain kind, seq(first+i) giving each job's seq,
// recorded in ids.
func PlainJobs(e *World, kind *jobinfo.Kind[PlainJob], seq func(k int) int64, ids *IDs) func(ctx context.Context, first, n int) error {
	return func(ctx context.Context, first, n int) error {
		jobs := make([]PlainJob, n)
		for i := range jobs {
			s := seq(first + i)
			jobs[i] = PlainJob{BlogID: plainBlogBase + s, Seq: s}
		}
		_, err := enqueueRecorded(ctx, e.DB, kind, jobs, ids)
		return err
	}
}
