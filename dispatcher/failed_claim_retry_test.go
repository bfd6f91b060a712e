package dispatcher_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// A claim that fails (its connection was terminated, the server restarts) is tried again within
// moments, not at the next poll: under a storm of terminated backends, a kind whose claims keep
// failing would otherwise sit idle for a PollInterval after each failure, with jobs due. Here every
// connection the dispatcher's pool hands out is refused while a job is enqueued (the enqueue's
// notification wakes the dispatcher, whose claim fails), then accepted again with nothing else to
// wake it: the job must start at once, long before the 20 s poll.
func TestFailedClaimIsRetriedBeforeThePoll(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	ctx := context.Background()
	var failing atomic.Bool
	var refused atomic.Int64
	cfg := b.db.Config()
	cfg.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) {
		if failing.Load() {
			refused.Add(1)
			return true, errors.New("injected: the database is unreachable")
		}
		return true, nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after the dispatcher has stopped: cleanups run last first
	kind := jobinfo.MustDefine[plainJob]("claim_retry")
	createKind(t, b.db, kind)
	started := make(chan int64, 1)
	c := b.cfg
	c.DB, c.PollInterval = pool, 20*time.Second
	b.start(t, c, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(_ context.Context, j *dispatcher.Job[plainJob]) error {
			started <- j.ID
			return nil
		})
	})

	failing.Store(true)
	job, err := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the dispatcher's pool to refuse a connection", 5*time.Second, func() (bool, error) { return refused.Load() > 0, nil })
	time.Sleep(300 * time.Millisecond) // the notified claim has surely run, and failed
	failing.Store(false)
	healed := time.Now()
	select {
	case id := <-started:
		if id != job.ID {
			t.Fatalf("started job %d, want %d", id, job.ID)
		}
		if took := time.Since(healed); took > 2*time.Second {
			t.Errorf("the job started %v after the database answered again; want well under the 20 s poll", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the job had not started 5 s after the database answered again (%d connections refused before): the failed claim waits for the 20 s poll", refused.Load())
	}
}
