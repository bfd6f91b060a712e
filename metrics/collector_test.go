package metrics_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
	"github.com/jobpipe/jobpipe/metrics"
)

// The three gauges users rely on, and keys at limit, read from the database while a dispatcher holds
// jobs: a kind with a total of 5 running 3 (its dispatcher runs 3 at once) with 7 waiting, a kind
// with no limit (+Inf), a paused kind (0), and a keyed kind with both its keys at their limit.
func TestGaugesFromTheDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	held := jobinfo.MustDefine[task]("metrics_held", jobinfo.Concurrency(3))
	free := jobinfo.MustDefine[task]("metrics_free")
	paused := jobinfo.MustDefine[task]("metrics_paused")
	keyed := jobinfo.MustDefine[account]("metrics_keyed")
	createKind(t, b.db, held)
	createKind(t, b.db, free)
	createKind(t, b.db, paused)
	createKind(t, b.db, keyed)
	if err := limits.SetMaxRunning(ctx, b.db, "metrics_held", 5); err != nil {
		t.Fatal(err)
	}
	if err := limits.Pause(ctx, b.db, "metrics_paused"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		mustEnqueue(t, b.db, held, task{N: int64(i)})
	}
	for i := range 2 {
		mustEnqueue(t, b.db, free, task{N: int64(i)}, dispatcher.ProcessIn(time.Hour))
	}
	for i := range 4 {
		mustEnqueue(t, b.db, paused, task{N: int64(i)})
	}
	for _, acct := range []string{"a", "a", "b", "b"} {
		mustEnqueue(t, b.db, keyed, account{Account: acct})
	}

	release := make(chan struct{})
	started := make(chan string, 100)
	block := func(kind string) func(context.Context) error {
		return func(ctx context.Context) error {
			started <- kind
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	never := func(context.Context, *dispatcher.Job[task]) error {
		t.Error("a job that should wait ran")
		return nil
	}
	b.start(t, b.config(t), func(d *dispatcher.Dispatcher) error {
		heldRun := block("held")
		keyedRun := block("keyed")
		return firstErr(
			dispatcher.Register(d, held, func(ctx context.Context, _ *dispatcher.Job[task]) error { return heldRun(ctx) }),
			dispatcher.Register(d, keyed, func(ctx context.Context, _ *dispatcher.Job[account]) error { return keyedRun(ctx) }),
			dispatcher.Register(d, free, never),
			dispatcher.Register(d, paused, never),
		)
	})
	released := false
	t.Cleanup(func() { // before the dispatcher's Stop (cleanups run last first)
		if !released {
			close(release)
		}
	})
	count := map[string]int{}
	for count["held"] < 3 || count["keyed"] < 2 {
		select {
		case k := <-started:
			count[k]++
		case <-time.After(10 * time.Second):
			t.Fatalf("started %v, want 3 held and 2 keyed", count)
		}
	}

	e := scrape(t, b.url)
	inf := math.Inf(1)
	for _, tc := range []struct {
		kind                             string
		running, max, remaining, atLimit float64
	}{
		{"metrics_held", 3, 5, 7, 0},
		{"metrics_free", 0, inf, 2, 0},
		{"metrics_paused", 0, 0, 4, 0},
		{"metrics_keyed", 2, inf, 2, 2},
	} {
		for _, g := range []struct {
			name string
			want float64
		}{
			{metrics.RunningJobs, tc.running}, {metrics.MaxRunningJobs, tc.max},
			{metrics.RemainingWorkCount, tc.remaining}, {metrics.KeysAtLimit, tc.atLimit},
		} {
			if got, ok := e.value(g.name, "kind", tc.kind); !ok || got != g.want {
				t.Errorf("%s{kind=%q} = %v (present %t), want %v", g.name, tc.kind, got, ok, g.want)
			}
		}
	}
	if got, ok := e.value(metrics.ScrapeErrors); !ok || got != 0 {
		t.Errorf("%s = %v (present %t), want 0", metrics.ScrapeErrors, got, ok)
	}
	if !strings.Contains(e.text, `jobpipe_max_running_jobs{kind="metrics_free"} +Inf`) {
		t.Errorf("no kind limit should read +Inf in the exposition:\n%s", e.text)
	}

	// Once released, every held job runs, and the gauges and counters say so.
	close(release)
	released = true
	waitFor(t, "every held job processed", 15*time.Second, func() bool {
		return countWhere(t, b.db, "metrics_held", "processed_at IS NOT NULL") == 10 &&
			countWhere(t, b.db, "metrics_keyed", "processed_at IS NOT NULL") == 4
	})
	waitFor(t, "the outcomes counted", 5*time.Second, func() bool {
		e = scrape(t, b.url)
		held, _ := e.value(metrics.JobsFinished, "kind", "metrics_held", "outcome", "processed")
		keyed, _ := e.value(metrics.JobsFinished, "kind", "metrics_keyed", "outcome", "processed")
		return held == 10 && keyed == 4
	})
	for kind, want := range map[string][4]float64{"metrics_held": {0, 5, 0, 0}, "metrics_keyed": {0, inf, 0, 0}} {
		for i, name := range []string{metrics.RunningJobs, metrics.MaxRunningJobs, metrics.RemainingWorkCount, metrics.KeysAtLimit} {
			if got, _ := e.value(name, "kind", kind); got != want[i] {
				t.Errorf("after the jobs ran: %s{kind=%q} = %v, want %v", name, kind, got, want[i])
			}
		}
	}
}

// A kind whose table is missing, or reads that time out, leave out only the gauges they would have
// given: the scrape succeeds, the other metrics are served, and jobpipe_scrape_errors_total counts
// the failures.
func TestScrapeErrorsKeepTheOtherMetrics(t *testing.T) {
	t.Parallel()
	t.Run("table missing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, metrics.WithLogger(slog.New(slog.DiscardHandler)))
		ctx := context.Background()
		kept := jobinfo.MustDefine[task]("metrics_kept")
		gone := jobinfo.MustDefine[task]("metrics_gone")
		createKind(t, b.db, kept)
		createKind(t, b.db, gone)
		mustEnqueue(t, b.db, kept, task{N: 1})
		if _, err := b.db.Exec(ctx, "DROP TABLE metrics_gone"); err != nil {
			t.Fatal(err)
		}
		e := scrape(t, b.url)
		if got, ok := e.value(metrics.RemainingWorkCount, "kind", "metrics_kept"); !ok || got != 1 {
			t.Errorf("the sound kind's remaining work = %v (present %t), want 1", got, ok)
		}
		if m := e.metric(metrics.RunningJobs, "kind", "metrics_gone"); m != nil {
			t.Errorf("the broken kind has a gauge: %v", m)
		}
		if got, _ := e.value(metrics.ScrapeErrors); got != 1 {
			t.Errorf("%s = %v, want 1", metrics.ScrapeErrors, got)
		}
		if got, _ := scrape(t, b.url).value(metrics.ScrapeErrors); got != 2 {
			t.Errorf("after a second scrape %s = %v, want 2", metrics.ScrapeErrors, got)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		b := setup(t, metrics.WithTimeout(time.Nanosecond), metrics.WithLogger(slog.New(slog.DiscardHandler)))
		createKind(t, b.db, jobinfo.MustDefine[task]("metrics_slow"))
		b.obs.Kind("metrics_slow").JobFinished(dispatcher.OutcomeProcessed, time.Millisecond)
		e := scrape(t, b.url)
		if fam := e.families[metrics.RunningJobs]; fam != nil {
			t.Errorf("gauges served although every read timed out: %v", fam)
		}
		if got, _ := e.value(metrics.ScrapeErrors); got != 1 {
			t.Errorf("%s = %v, want 1", metrics.ScrapeErrors, got)
		}
		if got, _ := e.value(metrics.JobsFinished, "kind", "metrics_slow", "outcome", "processed"); got != 1 {
			t.Errorf("the observer's counter = %v, want 1 whatever the database does", got)
		}
	})
}

func mustEnqueue[T any](t *testing.T, db *pgxpool.Pool, kind *jobinfo.Kind[T], job T, opts ...dispatcher.EnqueueOption) int64 {
	t.Helper()
	res, err := dispatcher.Enqueue(context.Background(), db, kind, job, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

func firstErr(errs ...error) error {
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("registration %d: %w", i, err)
		}
	}
	return nil
}
