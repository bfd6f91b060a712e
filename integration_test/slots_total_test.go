package integration_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
	"github.com/jobpipe/jobpipe/migrations"
)

type totalPlainJob struct {
	N int64 `jobpipe:"n"`
}

type totalKeyedJob struct {
	Account int64 `jobpipe:"account_id,key"`
	N       int64 `jobpipe:"n"`
}

// A kind's total limit (limits.SetMaxRunning) holds across dispatchers: two dispatchers in this
// process, each with room for 10 jobs of the kind, never run more than 3 of its jobs between them,
// and do run 3 at once. Raised to 5 at runtime, 5 run at once and never more. The handlers count
// themselves in this process, so the count is exact. With a keyed kind, the total holds on top of
// the per-key limits (here 5 keys x 2 allow 10).
func TestTotalMaxRunningAcrossDispatchers(t *testing.T) {
	t.Parallel()
	t.Run("kind without key", func(t *testing.T) {
		t.Parallel()
		kind := jobinfo.MustDefine[totalPlainJob]("total_plain")
		totalMaxRunning(t, kind, func(i int) totalPlainJob { return totalPlainJob{N: int64(i)} })
	})
	t.Run("keyed kind, 2 per key", func(t *testing.T) {
		t.Parallel()
		kind := jobinfo.MustDefine[totalKeyedJob]("total_keyed", jobinfo.KeyLimit(2))
		totalMaxRunning(t, kind, func(i int) totalKeyedJob { return totalKeyedJob{Account: int64(i % 5), N: int64(i)} })
	})
}

func totalMaxRunning[T any](t *testing.T, kind *jobinfo.Kind[T], job func(i int) T) {
	const dispatchers, jobs, concurrency = 2, 40, 10
	const sleep = 50 * time.Millisecond
	ctx := context.Background()
	faultkit.Reserve(t, dispatchers)
	s := testenv.NewSchema(t)
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	r := testenv.NewRedis(t)
	name := kind.Info().Name
	if err := limits.SetMaxRunning(ctx, s.Pool, name, 3); err != nil {
		t.Fatal(err)
	}

	var running, most atomic.Int64
	perDispatcher := make([]atomic.Int64, dispatchers)
	for i := range dispatchers {
		cfg := s.Config()
		cfg.MaxConns = 3
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close) // after the dispatcher's Stop: cleanups run last first
		d, err := dispatcher.New(dispatcher.Config{DB: pool, Redis: r.Clients, RedisPrefix: r.Prefix,
			NodeName: fmt.Sprintf("d%d", i), Concurrency: concurrency, LeaseTTL: 10 * time.Second, PollInterval: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		err = dispatcher.Register(d, kind, func(jctx context.Context, j *dispatcher.Job[T]) error {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			perDispatcher[i].Add(1)
			select {
			case <-time.After(sleep):
				return nil
			case <-jctx.Done():
				return context.Cause(jctx)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Start(ctx); err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		t.Cleanup(func() {
			once.Do(func() {
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := d.Stop(sctx); err != nil {
					t.Errorf("Stop d%d: %v", i, err)
				}
				if st := d.Stats(); st.Retried != 0 || st.Failed != 0 || st.LeasesLost != 0 || st.StaleFinishes != 0 {
					t.Errorf("d%d stats %+v: want no retry, failure, lost lease or stale finish", i, st)
				}
			})
		})
	}

	run := func(limit int, from int) {
		t.Helper()
		most.Store(running.Load())
		batch := make([]T, jobs)
		for i := range batch {
			batch[i] = job(from + i)
		}
		began := time.Now()
		if _, err := dispatcher.EnqueueMany(ctx, s.Pool, kind, batch); err != nil {
			t.Fatal(err)
		}
		faultkit.WaitFor(t, fmt.Sprintf("%d jobs processed", from+jobs), 30*time.Second, func() bool {
			var n int
			if err := s.Pool.QueryRow(ctx, "SELECT count(*) FROM "+name+" WHERE processed_at IS NOT NULL").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == from+jobs
		})
		took := time.Since(began)
		switch m := most.Load(); {
		case m > int64(limit):
			t.Errorf("total limit %d: %d jobs ran at once across the %d dispatchers", limit, m, dispatchers)
		case m < int64(limit):
			t.Errorf("total limit %d: at most %d jobs ran at once, although %d waited and the dispatchers had room for %d", limit, m, jobs, dispatchers*concurrency)
		}
		var per []int64
		for i := range perDispatcher {
			per = append(per, perDispatcher[i].Load())
		}
		// The floor of the time: one sleep per round of limit jobs.
		t.Logf("total limit %d: %d jobs in %v (at least %v at that limit), at most %d at once; handler calls per dispatcher so far %v",
			limit, jobs, took.Round(time.Millisecond), time.Duration((jobs+limit-1)/limit)*sleep, most.Load(), per)
	}
	run(3, 0)
	if err := limits.SetMaxRunning(ctx, s.Pool, name, 5); err != nil {
		t.Fatal(err)
	}
	time.Sleep(limitApplyWindow) // the change is in force in both dispatchers from here on
	run(5, jobs)
}
