package dispatcher_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/execlock"
	"github.com/jobpipe/jobpipe/jobinfo"
)

type accountJob struct {
	Account int64 `jobpipe:"account,unique"`
}

// A claim given back unrun (its slot's execution lock was still held elsewhere) leaves the job as if it
// had never started: attempt not counted, and it still blocks duplicates until it runs.
func TestReleasedJobStillBlocksDuplicates(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	ctx := context.Background()
	kind := jobinfo.MustDefine[accountJob]("account_job")
	createKind(t, b.db, kind)
	locker, err := execlock.New(&execlock.Config{Nodes: b.redis.Clients, Prefix: b.redis.Prefix, ExecTTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	held, err := locker.TryExec(ctx, "account_job", "1", 0) // a stalled worker still holds key 1's slot
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Release(ctx) }()
	first, _ := dispatcher.Enqueue(ctx, b.db, kind, accountJob{Account: 1})
	ran := make(chan struct{}, 1)
	d := b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(context.Context, *dispatcher.Job[accountJob]) error {
			ran <- struct{}{}
			return nil
		})
	})
	waitFor(t, "a claim given back", 10*time.Second, func() (bool, error) { return d.Stats().Released >= 1, nil })
	stopNow(t, d)
	if len(ran) != 0 {
		t.Fatal("the handler ran without the execution lock")
	}
	if n := countWhere(t, b.db, "account_job", "started_at IS NULL AND attempts_made = 0 AND lease_expires_at IS NULL AND process_after > created_at"); n != 1 {
		t.Errorf("%d rows back to never-started and waiting a moment, want 1", n)
	}
	dup, err := dispatcher.Enqueue(ctx, b.db, kind, accountJob{Account: 1})
	if err != nil || !dup.Duplicate || dup.ID != first.ID {
		t.Errorf("enqueue after the release = %+v, %v; want a duplicate of %d", dup, err, first.ID)
	}
}

// Stop while claims are under way never leaves a claimed job that nobody runs: whatever was claimed ran
// (or was put back), and no row stays leased.
func TestStopDuringClaimsLeavesNoLease(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	ctx := context.Background()
	kind := jobinfo.MustDefine[postSync]("post_sync")
	createKind(t, b.db, kind)
	var jobs []postSync
	for i := range 3000 {
		jobs = append(jobs, postSync{BlogID: int64(i % 300), Seq: int64(i)})
	}
	if _, err := dispatcher.EnqueueMany(ctx, b.db, kind, jobs); err != nil {
		t.Fatal(err)
	}
	for round := range 12 {
		d, err := dispatcher.New(b.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := dispatcher.Register(d, kind, func(context.Context, *dispatcher.Job[postSync]) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := d.Start(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(round*7) * time.Millisecond) // Stop lands at different points of a pass
		stopNow(t, d)
		if n := countWhere(t, b.db, "post_sync", "lease_expires_at IS NOT NULL"); n != 0 {
			t.Fatalf("round %d: %d rows leased after Stop (stats %+v)", round, n, d.Stats())
		}
	}
}
