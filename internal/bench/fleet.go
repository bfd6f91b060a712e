package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/execlock"
)

// fleet is the dispatchers of a run, each with a pool (and Redis clients) of its own, as separate
// processes would have.
type fleet struct {
	ds      []*dispatcher.Dispatcher
	pools   []*pgxpool.Pool
	stopped bool
}

// startFleet starts n dispatchers named label-0, label-1..., registering the kinds through reg. With
// locks set, each gets its own clients of the run's Redis nodes.
func (s *session) startFleet(ctx context.Context, n int, label string, locks bool, reg func(*dispatcher.Dispatcher) error) (f *fleet, err error) {
	f = &fleet{}
	defer func() {
		if err != nil {
			f.stop(ctx)
			f = nil
		}
	}()
	for i := range n {
		pool, err := pgxpool.NewWithConfig(ctx, s.config(s.opts.Pool))
		if err != nil {
			return nil, err
		}
		f.pools = append(f.pools, pool)
		var clients []*redis.Client
		if locks {
			if clients, err = s.redis.newClients(); err != nil {
				return nil, err
			}
		}
		d, err := dispatcher.New(dispatcher.Config{
			DB: pool, Redis: clients, RedisPrefix: s.redisPrefix(), NodeName: fmt.Sprintf("bench-%s-%d", label, i),
			Concurrency: s.opts.Workers, ClaimBatch: s.opts.ClaimBatch, Logger: s.logger,
			KeyRunJobs: s.opts.KeyRunJobs, KeyRunTime: s.opts.KeyRunTime,
		})
		if err != nil {
			return nil, err
		}
		if err := reg(d); err != nil {
			return nil, err
		}
		if err := d.Start(ctx); err != nil {
			return nil, err
		}
		f.ds = append(f.ds, d)
	}
	return f, nil
}

func (s *session) redisPrefix() string {
	if s.redis == nil {
		return ""
	}
	return s.redis.prefix
}

// stats sums the dispatchers' counters.
func (f *fleet) stats() dispatcher.Stats {
	var t dispatcher.Stats
	for _, d := range f.ds {
		s := d.Stats()
		t.Claimed += s.Claimed
		t.Processed += s.Processed
		t.Retried += s.Retried
		t.Failed += s.Failed
		t.Snoozed += s.Snoozed
		t.RunAgain += s.RunAgain
		t.Released += s.Released
		t.StaleFinishes += s.StaleFinishes
		t.LeasesLost += s.LeasesLost
		t.ClaimsRefused += s.ClaimsRefused
		t.PausesMissed += s.PausesMissed
		t.Rescued += s.Rescued
		t.RunClaimed += s.RunClaimed
		for i, n := range s.KeyRunsEnded {
			t.KeyRunsEnded[i] += n
		}
		t.Locks = addLockStats(t.Locks, s.Locks)
	}
	return t
}

// keyRunsEnded lists the key runs that ended by why, as "no_next 12 / budget 3 / ...", leaving out
// the ends none had.
func keyRunsEnded(s dispatcher.Stats) string {
	var parts []string
	for _, end := range dispatcher.RunEnds() {
		if n := s.KeyRunsEnded[end]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", end, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " / ")
}

func addLockStats(a, b execlock.Stats) execlock.Stats {
	return execlock.Stats{Acquired: a.Acquired + b.Acquired, Taken: a.Taken + b.Taken, Unavailable: a.Unavailable + b.Unavailable,
		Extended: a.Extended + b.Extended, ExtendFailed: a.ExtendFailed + b.ExtendFailed, Released: a.Released + b.Released,
		ReleaseFailed: a.ReleaseFailed + b.ReleaseFailed}
}

// processed is how many outcomes "processed" the dispatchers have recorded.
func (f *fleet) processed() int64 { return f.stats().Processed }

// stop stops every dispatcher (at most cleanupTimeout) and closes the pools; stats stay readable. It
// is safe to call twice.
func (f *fleet) stop(ctx context.Context) error {
	if f.stopped {
		return nil
	}
	f.stopped = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var errs []error
	for _, d := range f.ds {
		errs = append(errs, d.Stop(ctx))
	}
	for _, p := range f.pools {
		p.Close()
	}
	return errors.Join(errs...)
}

// stallTimeout is how long a run waits without any job being processed before it gives up waiting
// and goes on to its accounting, which then reports the jobs left as lost.
const stallTimeout = time.Minute

// waitProcessed waits until the fleet has recorded want processed jobs. When none is processed for
// stallTimeout, it records a failure and returns nil, so the run still checks and reports every job.
func (s *session) waitProcessed(ctx context.Context, f *fleet, want int64) error {
	return s.waitCount(ctx, "jobs to be processed", want, f.processed)
}

// waitCount waits until count reaches want, as waitProcessed does.
func (s *session) waitCount(ctx context.Context, what string, want int64, count func() int64) error {
	last, lastAt := count(), time.Now()
	return waitFor(ctx, fmt.Sprintf("%d %s", want, what), s.opts.Timeout, pollEvery, func() (bool, error) {
		p := count()
		if p >= want {
			return true, nil
		}
		if p != last {
			last, lastAt = p, time.Now()
		} else if time.Since(lastAt) > stallTimeout {
			s.report.fail("no progress for %v with %d of %d %s left: gave up waiting", stallTimeout, want-p, want, what)
			return true, nil
		}
		return false, nil
	})
}

// drainFleet shows progress while f works through jobs, waits until they are processed, stops the
// fleet and checks the accounting of table against led. It returns the time from start, and what
// the work cost from here to the last job processed.
func (s *session) drainFleet(ctx context.Context, f *fleet, label string, start time.Time, jobs int64, table pgx.Identifier, led *ledger) (time.Duration, accounting, workCost, error) {
	meter := s.startWork(ctx)
	stop := progress(s.opts.Log, s.opts.Progress, label, func() (int64, int64) {
		p := f.processed()
		return p, jobs - p
	})
	err := s.waitProcessed(ctx, f, jobs)
	elapsed := time.Since(start)
	stop()
	cost := meter.end(ctx, jobs)
	if err != nil {
		return elapsed, accounting{}, cost, err
	}
	if err := f.stop(ctx); err != nil {
		return elapsed, accounting{}, cost, err
	}
	acc, err := s.account(ctx, table, led, jobs, 0)
	return elapsed, acc, cost, err
}
