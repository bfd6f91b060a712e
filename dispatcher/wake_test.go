package dispatcher_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
)

// statementCounter counts the statements of plain kinds a pool sends: claims, reads of the next due
// time sent on their own (dueAlone), and finishes.
type statementCounter struct{ claims, dueAlone, finishes, listens atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	switch {
	case strings.HasPrefix(d.SQL, "WITH next AS"):
		c.claims.Add(1)
	case strings.HasPrefix(d.SQL, "SELECT (SELECT min(t.process_after)"):
		c.dueAlone.Add(1)
	case strings.HasPrefix(d.SQL, "WITH u AS ("):
		c.finishes.Add(1)
	case strings.HasPrefix(d.SQL, "LISTEN "):
		c.listens.Add(1)
	}
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A claim may go in a batch (see claimPlainReadingDue).
func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *statementCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if strings.HasPrefix(d.SQL, "WITH next AS") {
		c.claims.Add(1)
	}
}

func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// tracedPool returns a pool like db's whose connections report to tracer, closed at the test's end.
func tracedPool(t *testing.T, db *pgxpool.Pool, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	pcfg := db.Config()
	pcfg.ConnConfig.Tracer = tracer
	traced, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(traced.Close)
	return traced
}

// Jobs that trickle in, each worked before the next arrives, cost a claim each, which also reads the
// next due time: the end of a job does not make the dispatcher look for work again when nothing was
// left waiting (the next job's notification says when there is), while a backlog is still claimed as
// workers free up.
func TestJobEndsDoNotClaimWithoutBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("trickle")
	createKind(t, b.db, kind)
	counter := &statementCounter{}
	cfg := b.cfg
	cfg.DB, cfg.PollInterval, cfg.Concurrency = tracedPool(t, b.db, counter), time.Hour, 4
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(context.Context, *dispatcher.Job[plainJob]) error { return nil })
	})
	// Start claims once, and again once its LISTEN connection is up (notifications may have been
	// missed before it): wait for both, rather than a fixed time a slow machine may exceed.
	waitFor(t, "the first claim and LISTEN", 10*time.Second, func() (bool, error) {
		return counter.claims.Load() >= 1 && counter.listens.Load() >= 2, nil
	})
	time.Sleep(200 * time.Millisecond) // the claim the LISTEN connection's wake-up sets off
	counter.claims.Store(0)
	counter.dueAlone.Store(0)
	const trickle = 20
	for i := range trickle {
		if _, err := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: int64(i)}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the job processed", 10*time.Second, func() (bool, error) {
			return d.Stats().Processed == int64(i+1), nil
		})
	}
	time.Sleep(100 * time.Millisecond) // any claim a job's end would set off
	if n := counter.claims.Load(); n != trickle {
		t.Errorf("%d claims for %d jobs enqueued one at a time; want one each", n, trickle)
	}
	// Each claim fell short and the producer then needed the next due time: the claim read it.
	if n := counter.dueAlone.Load(); n != 0 {
		t.Errorf("%d reads of the next due time on their own for %d claims that fell short; want each in its claim's round trip", n, trickle)
	}

	// A backlog of 40 jobs on 4 workers is claimed as workers free up, without a poll.
	var jobs []plainJob
	for i := range 40 {
		jobs = append(jobs, plainJob{N: int64(100 + i)})
	}
	if _, err := dispatcher.EnqueueMany(ctx, b.db, kind, jobs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the backlog processed", 10*time.Second, func() (bool, error) {
		return d.Stats().Processed == trickle+40, nil
	})
}

// A claim that started above the front of the index (a backlog's) and fell short looks at the front
// at once: a job committed after one with a higher id waits below where it started, and no
// notification need come for it (here it is inserted without one, and there is no poll).
func TestShortClaimFromTheMiddleLooksAtTheFront(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("front")
	createKind(t, b.db, kind)
	release := make(chan struct{})
	cfg := b.cfg
	cfg.PollInterval, cfg.Concurrency, cfg.ClaimBatch = time.Hour, 4, 4
	var jobs []plainJob
	for i := range 8 {
		jobs = append(jobs, plainJob{N: int64(i + 1)})
	}
	if _, err := dispatcher.EnqueueMany(ctx, b.db, kind, jobs); err != nil {
		t.Fatal(err)
	}
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[plainJob]) error {
			if j.Data.N > 0 {
				<-release
			}
			return nil
		})
	})
	// The first claim takes jobs 1-4, full; once they end, the next starts at job 1's id and takes
	// 5-8, full too, and the one after starts at job 5's.
	release <- struct{}{}
	release <- struct{}{}
	release <- struct{}{}
	release <- struct{}{}
	waitFor(t, "jobs 5-8 running", 10*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "front", "lease_expires_at IS NOT NULL AND n > 4") == 4, nil
	})
	if _, err := b.db.Exec(ctx, "INSERT INTO front (id, n, note) VALUES (0, 0, '')"); err != nil {
		t.Fatal(err)
	}
	close(release)
	waitFor(t, "the job below the claims' start processed", 10*time.Second, func() (bool, error) {
		return d.Stats().Processed == 9, nil
	})
}

// The due timer is armed from the next due time as the last claim read it, never an older reading:
// here a claim reads it (an hour away) and takes a job, a job due shortly is enqueued while that job
// runs, and the claim after the job's end must arm the timer for it. PollInterval is an hour, so only
// the timer can start it.
func TestDueTimerFollowsTheLatestReading(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("due_reading")
	createKind(t, b.db, kind)
	if _, err := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 1}, dispatcher.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	started, release := make(chan int64, 3), make(chan struct{})
	cfg := b.cfg
	cfg.PollInterval, cfg.Concurrency, cfg.ClaimBatch = time.Hour, 1, 1
	b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(_ context.Context, j *dispatcher.Job[plainJob]) error {
			started <- j.Data.N
			if j.Data.N == 2 {
				<-release
			}
			return nil
		})
	})
	if _, err := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 2}); err != nil {
		t.Fatal(err)
	}
	if n := <-started; n != 2 {
		t.Fatalf("job %d started first, want 2", n)
	}
	if _, err := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 3}, dispatcher.ProcessIn(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	// Past fullClaimEvery, the claim after job 2 reads the whole index and, finding nothing due, arms
	// the timer rather than looking again at once.
	time.Sleep(1200 * time.Millisecond)
	close(release)
	select {
	case n := <-started:
		if n != 3 {
			t.Fatalf("job %d started, want 3", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job due in 1.5 s did not start within 10 s: the due timer was armed from a stale reading")
	}
}

// Outcomes that trickle in wait up to Config.FinishWait to be written together, a keyed kind's too
// when they end their key runs; with a negative FinishWait, for a kind with a total limit (whose
// finished jobs hold a share of it until written), or when an outcome continues a key run (whose next
// job waits for it), each is written at once.
func TestFinishWaitGathersTricklingOutcomes(t *testing.T) {
	t.Parallel()
	const jobs = 10
	for _, tc := range []struct {
		name       string
		finishWait time.Duration
		total      bool
		keys       int  // 0: a plain kind; else a keyed kind's jobs spread over that many keys
		together   bool // enqueued at once, each processed within the wait; or one at a time
		want       func(n int64) bool
		wantText   string
	}{
		{name: "gathered", finishWait: 800 * time.Millisecond, together: true, want: func(n int64) bool { return n >= 1 && n <= 2 }, wantText: "1 (2 if the jobs outlasted the wait)"},
		{name: "no wait", finishWait: -1, want: func(n int64) bool { return n == jobs }, wantText: "one per job"},
		{name: "total limit", finishWait: 800 * time.Millisecond, total: true, want: func(n int64) bool { return n == jobs }, wantText: "one per job"},
		// The kind's two statement loops gather apart.
		{name: "keyed, a job per key", finishWait: 800 * time.Millisecond, keys: jobs, together: true, want: func(n int64) bool { return n >= 1 && n <= 4 }, wantText: "1 or 2 (twice that if the jobs outlasted the wait)"},
		{name: "keyed, one key's run", finishWait: 800 * time.Millisecond, keys: 1, together: true, want: func(n int64) bool { return n == jobs }, wantText: "one per job"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := newRun(t)
			kind := jobinfo.MustDefine[plainJob]("finish_wait")
			keyed := jobinfo.MustDefine[postSync]("finish_wait")
			if tc.keys > 0 {
				createKind(t, b.db, keyed)
			} else {
				createKind(t, b.db, kind)
			}
			if tc.total {
				if err := limits.SetMaxRunning(ctx, b.db, "finish_wait", 100); err != nil {
					t.Fatal(err)
				}
			}
			counter := &statementCounter{}
			cfg := b.cfg
			cfg.DB, cfg.FinishWait = tracedPool(t, b.db, counter), tc.finishWait
			d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
				if tc.keys > 0 {
					// The outcomes trickle in, 40 ms apart, all within the wait.
					return dispatcher.Register(d, keyed, func(_ context.Context, j *dispatcher.Job[postSync]) error {
						time.Sleep(time.Duration(j.Data.Seq) * 40 * time.Millisecond)
						return nil
					})
				}
				return dispatcher.Register(d, kind, func(context.Context, *dispatcher.Job[plainJob]) error { return nil })
			})
			start := time.Now()
			if tc.keys > 0 {
				// Enqueued before the dispatcher claims any, so that one key's jobs make one run.
				var posts []postSync
				for i := range jobs {
					posts = append(posts, postSync{BlogID: int64(i % tc.keys), Seq: int64(i)})
				}
				if _, err := dispatcher.EnqueueMany(ctx, b.db, keyed, posts); err != nil {
					t.Fatal(err)
				}
			}
			for i := range jobs {
				if tc.keys > 0 {
					break
				}
				if _, err := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: int64(i)}); err != nil {
					t.Fatal(err)
				}
				if !tc.together {
					// Processed well within the wait: nothing held the outcome back.
					waitFor(t, "the job processed", 400*time.Millisecond, func() (bool, error) {
						return d.Stats().Processed == int64(i+1), nil
					})
				}
			}
			// One key's run would take 10 waits of 800 ms if its outcomes waited, besides its 1.8 s of
			// handlers.
			waitFor(t, "every job processed", 5*time.Second, func() (bool, error) {
				return d.Stats().Processed == jobs, nil
			})
			if n := counter.finishes.Load(); !tc.want(n) {
				t.Errorf("%d finish statements for %d jobs in %v; want %s", n, jobs, time.Since(start).Round(time.Millisecond), tc.wantText)
			}
			if n := countWhere(t, b.db, "finish_wait", "processed_at IS NOT NULL AND lease_expires_at IS NULL"); n != jobs {
				t.Errorf("%d rows processed; want %d", n, jobs)
			}
		})
	}
}
