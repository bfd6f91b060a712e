package dispatcher_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// TestClaimRefusedMidStatementKeepsThePass makes the database refuse a claim while its statement
// runs: another transaction puts a job of the key in the slot the claim asks for and commits while
// the claim waits on the running-slots index (23505). The claim runs in a savepoint sent in one round
// trip with it; the refusal rolls back to the savepoint, and the pass goes on one job at a time: the
// refused job waits, the pass's other job runs, and once the slot is free again the refused job runs
// too, once.
func TestClaimRefusedMidStatementKeepsThePass(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("post_sync")
	createKind(t, b.db, kind)
	res, err := dispatcher.EnqueueMany(ctx, b.db, kind, []postSync{{BlogID: 1, Seq: 0}, {BlogID: 1, Seq: 1}, {BlogID: 2, Seq: 0}})
	if err != nil {
		t.Fatal(err)
	}
	first, elsewhere := res[0].ID, res[1].ID

	// Another dispatcher's claim, not yet committed: key 1's later job in slot 0.
	other, err := b.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(ctx) }()
	if _, err := other.Exec(ctx, `UPDATE post_sync SET lease_expires_at = now() + interval '1 hour', lease_owner = 'elsewhere',
		started_at = now(), attempts_made = 1, lock_slot = 0, lock_token = lock_token + 1 WHERE id = $1`, elsewhere); err != nil {
		t.Fatal(err)
	}

	var (
		mu  sync.Mutex
		ran = map[int64]int{}
	)
	cfg := b.cfg
	cfg.Concurrency = 4
	// Its own application_name tells this dispatcher's sessions from other tests' in pg_stat_activity.
	app := fmt.Sprintf("jobpipe_refused_%d", time.Now().UnixNano())
	poolCfg := b.db.Config()
	poolCfg.ConnConfig.RuntimeParams["application_name"] = app
	cfg.DB, err = pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cfg.DB.Close)
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(_ context.Context, j *dispatcher.Job[postSync]) error {
			mu.Lock()
			defer mu.Unlock()
			ran[j.ID]++
			return nil
		})
	})
	// The pass's claim waits for the other transaction's entry in the running-slots index.
	waitFor(t, "the claim to wait on the running-slots index", 10*time.Second, func() (bool, error) {
		var n int
		err := b.db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE '%UPDATE%post_sync%'`, app).Scan(&n)
		return n > 0, err
	})
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "key 2's job to be processed", 10*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "post_sync", "blog_id = 2 AND processed_at IS NOT NULL") == 1, nil
	})
	if got := d.Stats().ClaimsRefused; got != 1 {
		t.Fatalf("ClaimsRefused %d, want 1: the refused claim of job %d", got, first)
	}
	if n := countWhere(t, b.db, "post_sync", "blog_id = 1 AND seq = 0 AND lease_expires_at IS NULL AND processed_at IS NULL AND attempts_made = 0"); n != 1 {
		t.Fatalf("key 1's first job: %d rows waiting unattempted, want 1 (its claim was refused)", n)
	}

	// The other dispatcher's job ends; key 1's first job runs then.
	if _, err := b.db.Exec(ctx, `UPDATE post_sync SET lease_expires_at = NULL, lease_owner = NULL, lock_slot = NULL,
		processed_at = now() WHERE id = $1`, elsewhere); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "key 1's first job to be processed", 10*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "post_sync", "processed_at IS NOT NULL") == 3, nil
	})
	mu.Lock()
	defer mu.Unlock()
	if ran[first] != 1 || ran[res[2].ID] != 1 || ran[elsewhere] != 0 || len(ran) != 2 {
		t.Fatalf("handler runs by job %v; want key 1's first job and key 2's job once each, and not the job run elsewhere (%d)", ran, elsewhere)
	}
}
