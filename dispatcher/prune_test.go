package dispatcher_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// The pruning leader of a kind deletes its finished jobs past the kind's retention, every
// PruneInterval, and counts them in Stats; waiting and running jobs stay, as do finished ones within
// their retention.
func TestPruneLeaderDeletesOldFinishedJobs(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	ctx := context.Background()
	kind := jobinfo.MustDefine[plainJob]("mail", jobinfo.Retention(time.Hour, 2*time.Hour))
	createKind(t, b.db, kind)
	if _, err := b.db.Exec(ctx, `INSERT INTO mail (n, note, created_at, processed_at, failed_at, process_after, started_at, lease_expires_at, lease_owner) VALUES
		(1, 'processed 61 min ago', now() - interval '2 hours', now() - interval '61 minutes', NULL, NULL, NULL, NULL, NULL),
		(2, 'processed 59 min ago', now() - interval '2 hours', now() - interval '59 minutes', NULL, NULL, NULL, NULL, NULL),
		(3, 'failed 121 min ago', now() - interval '3 hours', NULL, now() - interval '121 minutes', NULL, NULL, NULL, NULL),
		(4, 'failed 119 min ago', now() - interval '3 hours', NULL, now() - interval '119 minutes', NULL, NULL, NULL, NULL),
		(5, 'waiting for a week', now() - interval '7 days', NULL, NULL, now() + interval '1 day', NULL, NULL, NULL),
		(6, 'running for a day', now() - interval '1 day', NULL, NULL, NULL, now() - interval '1 day', now() + interval '1 hour', 'elsewhere')`); err != nil {
		t.Fatal(err)
	}
	cfg := b.cfg
	cfg.PruneInterval = 100 * time.Millisecond
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(context.Context, *dispatcher.Job[plainJob]) error { return nil })
	})
	waitFor(t, "the old finished jobs pruned", 10*time.Second, func() (bool, error) {
		s := d.Stats()
		return s.PrunedProcessed+s.PrunedFailed >= 2, nil
	})
	if n := countWhere(t, b.db, "jobpipe_leaders", "name = 'prune:mail' AND holder = '"+cfg.NodeName+"'"); n != 1 {
		t.Errorf("prune lease rows held by this node: %d, want 1", n)
	}
	stopNow(t, d)
	if s := d.Stats(); s.PrunedProcessed != 1 || s.PrunedFailed != 1 {
		t.Errorf("Stats: pruned %d processed, %d failed; want 1 and 1", s.PrunedProcessed, s.PrunedFailed)
	}
	rows, err := b.db.Query(ctx, `SELECT n FROM mail ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{2, 4, 5, 6}; !slices.Equal(left, want) {
		t.Errorf("rows left %v, want %v", left, want)
	}
	if n := countWhere(t, b.db, "jobpipe_leaders", "true"); n != 0 {
		t.Errorf("%d leases left after Stop", n)
	}
}

// A negative PruneInterval turns pruning off in the dispatcher: it never takes a pruning lease. A
// kind kept forever is not pruned by anyone.
func TestPruneOff(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	ctx := context.Background()
	kept := jobinfo.MustDefine[plainJob]("kept", jobinfo.Retention(jobinfo.KeepForever, jobinfo.KeepForever))
	mail := jobinfo.MustDefine[plainJob]("mail")
	news := jobinfo.MustDefine[plainJob]("news")
	for _, k := range []*jobinfo.Kind[plainJob]{kept, mail, news} {
		createKind(t, b.db, k)
	}
	noop := func(context.Context, *dispatcher.Job[plainJob]) error { return nil }
	off := b.cfg
	off.PruneInterval, off.NodeName = -1, "off"
	b.start(t, off, func(d *dispatcher.Dispatcher) error { return dispatcher.Register(d, mail, noop) })
	on := b.cfg
	on.NodeName = "on"
	b.start(t, on, func(d *dispatcher.Dispatcher) error {
		if err := dispatcher.Register(d, kept, noop); err != nil {
			return err
		}
		return dispatcher.Register(d, news, noop)
	})
	// Two rounds of each leader loop: the first one's lease renewals are all done.
	var renewed [2]time.Time
	for i := range renewed {
		waitFor(t, "a leader round of each node", 10*time.Second, func() (bool, error) {
			var off, on time.Time
			err := b.db.QueryRow(ctx, `SELECT (SELECT expires_at FROM jobpipe_leaders WHERE name = 'rescue:mail'),
				(SELECT expires_at FROM jobpipe_leaders WHERE name = 'rescue:kept')`).Scan(&off, &on)
			if err != nil {
				return false, nil // not both taken yet
			}
			if i == 0 {
				renewed = [2]time.Time{off, on}
				return true, nil
			}
			return off.After(renewed[0]) && on.After(renewed[1]), nil
		})
	}
	rows, err := b.db.Query(ctx, `SELECT name || ' ' || holder FROM jobpipe_leaders WHERE name LIKE 'prune:%'`)
	if err != nil {
		t.Fatal(err)
	}
	leases, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"prune:news on"}; !slices.Equal(leases, want) {
		t.Errorf("pruning leases %q, want %q", leases, want)
	}
}
