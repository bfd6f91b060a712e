package admin_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/uniqueness"
)

func assertResult(t *testing.T, got admin.ActionResult, changed []int64, skipped []admin.Skipped) {
	t.Helper()
	if !slices.Equal(got.Changed, changed) || !slices.Equal(got.Skipped, skipped) {
		t.Errorf("result:\n got changed %v skipped %+v\nwant changed %v skipped %+v", got.Changed, got.Skipped, changed, skipped)
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO notice (user_id, event_id, body) VALUES
	(1, 'e1', 'a'), (1, 'e2', 'b'), (2, 'e3', 'c'), (2, 'e4', 'd'), (3, 'e5', 'e'), (4, 'e7', 'g'), (5, 'e8', 'h')`)
	exec(t, s, `UPDATE notice SET `+setRunning+`, lock_slot = 0 WHERE id = 2`)
	exec(t, s, `UPDATE notice SET `+setProcessed+` WHERE id = 3`)
	// Job 4 used up its 3 attempts.
	exec(t, s, `UPDATE notice SET attempts_made = 3, started_at = now(), lock_token = 3, failed_at = now(), last_error = 'boom' WHERE id = 4`)
	// Jobs 5, 6 and 7 were discarded before they ever started; then job 8 came for event e5, and job
	// 9 for e8, discarded too.
	exec(t, s, `UPDATE notice SET failed_at = now(), last_error = 'discarded by an operator' WHERE id IN (5, 6, 7)`)
	exec(t, s, `INSERT INTO notice (user_id, event_id, body) VALUES (3, 'e5', 'f'), (5, 'e8', 'i')`)
	exec(t, s, `UPDATE notice SET failed_at = now(), last_error = 'discarded by an operator' WHERE id = 9`)
	wait := listen(t, s, uniqueness.NotifyChannel)
	k := load(t, s, "notice")

	res, err := admin.Retry(ctx, s.Pool, k, []int64{4, 1, 2, 3, 5, 6, 7, 9, 99, 4})
	if err != nil {
		t.Fatal(err)
	}
	assertResult(t, res, []int64{3, 4, 6, 7}, []admin.Skipped{
		{ID: 1, Reason: admin.ReasonAlreadyWaiting},
		{ID: 2, Reason: admin.ReasonRunning},
		{ID: 5, Reason: "job 8 has the same unique fields and has not started: retrying this one too would make two"},
		{ID: 9, Reason: "job 7 has the same unique fields and has not started: retrying this one too would make two"},
		{ID: 99, Reason: admin.ReasonNoSuchJob},
	})
	wait("notice")
	assertRows(t, "rows after the retry", pipelineRows(t, s, "notice"), []string{
		"1 waiting attempts=0 token=0 slot=- after=null error=-",
		"2 running attempts=1 token=1 slot=0 after=null error=-",
		"3 waiting attempts=1 token=1 slot=- after=now error=-",
		"4 waiting attempts=3 token=3 slot=- after=now error=boom",
		"5 failed attempts=0 token=0 slot=- after=null error=discarded by an operator",
		"6 waiting attempts=0 token=0 slot=- after=now error=discarded by an operator",
		"7 waiting attempts=0 token=0 slot=- after=now error=discarded by an operator",
		"8 waiting attempts=0 token=0 slot=- after=null error=-",
		"9 failed attempts=0 token=0 slot=- after=null error=discarded by an operator",
	})
	// Job 6 never started, so it is again the job that a new one of its event duplicates.
	dup, err := admin.Enqueue(ctx, s.Pool, k, admin.EnqueueRequest{Data: []byte(`{"user_id": 4, "event_id": "e7", "body": "z"}`)})
	if err != nil || dup != (uniqueness.Result{ID: 6, Duplicate: true}) {
		t.Errorf("enqueue of event e7 = %+v, %v; want a duplicate of job 6", dup, err)
	}
}

// A job that used up its attempts and is retried gets exactly one more: the dispatcher counts
// attempts from attempts_made, which Retry keeps.
func TestRetryGivesOneMoreAttempt(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO sweep (target, attempts_made, started_at, lock_token, failed_at, last_error)
VALUES ('disk', 2, now(), 2, now(), 'full')`) // sweep has 2 attempts
	if _, err := admin.Retry(ctx, s.Pool, load(t, s, "sweep"), []int64{1}); err != nil {
		t.Fatal(err)
	}

	d, err := dispatcher.New(dispatcher.Config{DB: s.Pool, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	err = dispatcher.Register(d, sweeps, func(context.Context, *dispatcher.Job[sweep]) error {
		calls.Add(1)
		return errors.New("still full")
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for queryInt(t, s, `SELECT count(*) FROM sweep WHERE failed_at IS NOT NULL`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the retried job did not fail again within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	assertRows(t, "rows", pipelineRows(t, s, "sweep"), []string{"1 failed attempts=3 token=3 slot=- after=now error=still full"})
}

func TestDiscard(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO notice (user_id, event_id, body, process_after) VALUES
	(1, 'e1', 'a', NULL), (1, 'e2', 'b', now() + interval '1 hour'), (2, 'e3', 'c', NULL), (2, 'e4', 'd', NULL),
	(3, 'e5', 'e', NULL), (3, 'e6', 'f', NULL), (4, 'e7', 'g', NULL)`)
	// Job 3 is retrying after a failed attempt.
	exec(t, s, `UPDATE notice SET attempts_made = 1, started_at = now(), lock_token = 1, last_error = 'timeout',
	process_after = now() + interval '10 minutes' WHERE id = 3`)
	exec(t, s, `UPDATE notice SET `+setRunning+`, lock_slot = 0 WHERE id = 4`)
	exec(t, s, `UPDATE notice SET `+setProcessed+` WHERE id = 5`)
	exec(t, s, `UPDATE notice SET `+setFailed+` WHERE id = 6`)
	wait := listen(t, s, uniqueness.NotifyChannel)
	k := load(t, s, "notice")

	res, err := admin.Discard(ctx, s.Pool, k, []int64{6, 5, 4, 3, 2, 1, 1, 42}, "bad payload")
	if err != nil {
		t.Fatal(err)
	}
	assertResult(t, res, []int64{1, 2, 3}, []admin.Skipped{
		{ID: 4, Reason: admin.ReasonDiscardRunning},
		{ID: 5, Reason: admin.ReasonProcessed},
		{ID: 6, Reason: admin.ReasonFailed},
		{ID: 42, Reason: admin.ReasonNoSuchJob},
	})
	wait("notice")
	res, err = admin.Discard(ctx, s.Pool, k, []int64{7}, "")
	if err != nil {
		t.Fatal(err)
	}
	assertResult(t, res, []int64{7}, nil)
	assertRows(t, "rows after the discards", pipelineRows(t, s, "notice"), []string{
		"1 failed attempts=0 token=0 slot=- after=null error=discarded by an operator: bad payload",
		"2 failed attempts=0 token=0 slot=- after=future error=discarded by an operator: bad payload",
		"3 failed attempts=1 token=1 slot=- after=future error=discarded by an operator: bad payload",
		"4 running attempts=1 token=1 slot=0 after=null error=-",
		"5 processed attempts=1 token=1 slot=- after=null error=-",
		"6 failed attempts=1 token=1 slot=- after=null error=boom",
		"7 failed attempts=0 token=0 slot=- after=null error=discarded by an operator",
	})
}

// claimSQL claims one waiting job as a dispatcher does: a single UPDATE whose condition is the
// waiting state.
const claimSQL = `UPDATE sweep SET attempts_made = attempts_made + 1, started_at = now(),
	lease_expires_at = now() + interval '1 minute', lease_owner = 'node-a', lock_token = lock_token + 1, updated_at = now()
WHERE id = $1 AND lease_expires_at IS NULL AND processed_at IS NULL AND failed_at IS NULL RETURNING id`

// A discard that meets a claim in progress waits for its row lock, then sees the row running and
// leaves it.
func TestDiscardWaitsForAClaim(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO sweep (target) VALUES ('a')`)
	k := load(t, s, "sweep")

	claim, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = claim.Rollback(ctx) }()
	var pid int32
	if err := claim.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := claim.Exec(ctx, claimSQL, 1); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res admin.ActionResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := admin.Discard(ctx, s.Pool, k, []int64{1}, "")
		done <- outcome{res, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for queryInt(t, s, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, pid) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the discard never waited for the claim's row lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := claim.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	assertResult(t, o.res, nil, []admin.Skipped{{ID: 1, Reason: admin.ReasonChanged}})
	assertRows(t, "rows", pipelineRows(t, s, "sweep"), []string{"1 running attempts=1 token=1 slot=- after=null error=-"})
}

// Claims and a discard of the same jobs race: each job is either claimed and running, untouched by
// the discard, or discarded and never claimed.
func TestDiscardRacingClaims(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	const n = 300
	exec(t, s, `INSERT INTO sweep (target) SELECT 'job' || i FROM generate_series(1, $1) i`, n)
	k := load(t, s, "sweep")
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i + 1)
	}

	var wg sync.WaitGroup
	claimed := make(chan int64, n)
	started := make(chan struct{}, n)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				id, err := claimSlowly(ctx, s.Pool, ids[i])
				switch {
				case errors.Is(err, pgx.ErrNoRows): // discarded first
				case err != nil:
					t.Error(err)
					return
				default:
					claimed <- id
				}
				started <- struct{}{}
			}
		})
	}
	for range 40 { // the discard starts while claims go on
		<-started
	}
	res, err := admin.Discard(ctx, s.Pool, k, ids, "race")
	wg.Wait()
	close(claimed)
	if err != nil {
		t.Fatal(err)
	}
	var claims []int64
	for id := range claimed {
		claims = append(claims, id)
	}
	slices.Sort(claims)
	changedMeanwhile := 0
	var skipped []int64
	for _, sk := range res.Skipped {
		if sk.Reason == admin.ReasonChanged {
			changedMeanwhile++
		}
		if sk.Reason != admin.ReasonChanged && sk.Reason != admin.ReasonDiscardRunning {
			t.Errorf("job %d skipped: %s", sk.ID, sk.Reason)
		}
		skipped = append(skipped, sk.ID)
	}
	t.Logf("%d discarded, %d claimed, of which %d while the discard ran", len(res.Changed), len(claims), changedMeanwhile)
	if !slices.Equal(skipped, claims) {
		t.Errorf("skipped %v, want the claimed jobs %v", skipped, claims)
	}
	if len(res.Changed)+len(claims) != n {
		t.Errorf("%d discarded and %d claimed, want %d in all", len(res.Changed), len(claims), n)
	}
	got := queryRows(t, s, `SELECT format('%s running=%s', count(*), (lease_expires_at IS NOT NULL)::text)
FROM sweep WHERE (lease_expires_at IS NOT NULL AND failed_at IS NULL AND attempts_made = 1)
	OR (failed_at IS NOT NULL AND last_error = 'discarded by an operator: race' AND attempts_made = 0 AND lease_expires_at IS NULL)
GROUP BY lease_expires_at IS NOT NULL ORDER BY 1`)
	var want []string
	if d := len(res.Changed); d > 0 {
		want = append(want, fmt.Sprintf("%d running=false", d))
	}
	if len(claims) > 0 {
		want = append(want, fmt.Sprintf("%d running=true", len(claims)))
	}
	slices.Sort(want)
	assertRows(t, "rows by outcome", got, want)
}

// claimSlowly claims job id in a transaction that holds the row a little before it commits, so that
// a concurrent discard meets claims in progress.
func claimSlowly(ctx context.Context, db *pgxpool.Pool, id int64) (int64, error) {
	var claimed int64
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, claimSQL, id).Scan(&claimed); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_sleep(0.002)`)
		return err
	})
	return claimed, err
}

func TestRunNow(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO notice (user_id, event_id, body, process_after) VALUES
	(1, 'e1', 'a', NULL), (1, 'e2', 'b', now() - interval '1 hour'), (2, 'e3', 'c', now() + interval '1 hour'),
	(2, 'e4', 'd', NULL), (3, 'e5', 'e', NULL), (3, 'e6', 'f', NULL), (4, 'e7', 'g', NULL)`)
	exec(t, s, `UPDATE notice SET attempts_made = 1, started_at = now(), lock_token = 1, last_error = 'timeout',
	process_after = now() + interval '10 minutes' WHERE id = 4`)
	exec(t, s, `UPDATE notice SET `+setRunning+`, lock_slot = 0 WHERE id = 5`)
	exec(t, s, `UPDATE notice SET `+setProcessed+` WHERE id = 6`)
	exec(t, s, `UPDATE notice SET `+setFailed+` WHERE id = 7`)
	wait := listen(t, s, uniqueness.NotifyChannel)

	res, err := admin.RunNow(ctx, s.Pool, load(t, s, "notice"), []int64{8, 7, 6, 5, 4, 3, 2, 1})
	if err != nil {
		t.Fatal(err)
	}
	assertResult(t, res, []int64{3, 4}, []admin.Skipped{
		{ID: 1, Reason: admin.ReasonAlreadyDue},
		{ID: 2, Reason: admin.ReasonAlreadyDue},
		{ID: 5, Reason: admin.ReasonRunning},
		{ID: 6, Reason: admin.ReasonProcessed},
		{ID: 7, Reason: admin.ReasonFailed},
		{ID: 8, Reason: admin.ReasonNoSuchJob},
	})
	wait("notice")
	assertRows(t, "rows after run-now", pipelineRows(t, s, "notice"), []string{
		"1 waiting attempts=0 token=0 slot=- after=null error=-",
		"2 waiting attempts=0 token=0 slot=- after=past error=-",
		"3 waiting attempts=0 token=0 slot=- after=now error=-",
		"4 waiting attempts=1 token=1 slot=- after=now error=timeout",
		"5 running attempts=1 token=1 slot=0 after=null error=-",
		"6 processed attempts=1 token=1 slot=- after=null error=-",
		"7 failed attempts=1 token=1 slot=- after=null error=boom",
	})
}

func TestActionsWithoutIDs(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	k := load(t, s, "sweep")
	for name, run := range map[string]func() (admin.ActionResult, error){
		"retry":   func() (admin.ActionResult, error) { return admin.Retry(ctx, s.Pool, k, nil) },
		"discard": func() (admin.ActionResult, error) { return admin.Discard(ctx, s.Pool, k, []int64{}, "x") },
		"run now": func() (admin.ActionResult, error) { return admin.RunNow(ctx, s.Pool, k, nil) },
	} {
		_, err := run()
		want := "admin: invalid: no job ids given to " + name
		if err == nil || err.Error() != want || !errors.Is(err, admin.ErrInvalid) {
			t.Errorf("%s without ids: %v, want %q", name, err, want)
		}
	}
}

func TestRetryAllFailed(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO sweep (target, attempts_made, started_at, lock_token, failed_at, last_error)
SELECT 'f' || i, 2, now(), 2, now(), 'boom' FROM generate_series(1, 2500) i`)
	exec(t, s, `INSERT INTO sweep (target, attempts_made, started_at, lock_token, processed_at)
SELECT 'p' || i, 1, now(), 1, now() FROM generate_series(1, 10) i`)
	exec(t, s, `INSERT INTO sweep (target) VALUES ('w1'), ('w2'), ('w3')`)

	var progress []string
	n, err := admin.RetryAllFailed(ctx, s.Pool, load(t, s, "sweep"), func(done, total int64) {
		progress = append(progress, fmt.Sprintf("%d/%d", done, total))
	})
	if err != nil || n != 2500 {
		t.Fatalf("RetryAllFailed = %d, %v; want 2500", n, err)
	}
	assertRows(t, "progress", progress, []string{"1000/2500", "2000/2500", "2500/2500"})
	assertRows(t, "rows by state", queryRows(t, s, `SELECT format('%s %s attempts=%s error=%s', count(*),
	CASE WHEN processed_at IS NOT NULL THEN 'processed' WHEN failed_at IS NOT NULL THEN 'failed'
		WHEN lease_expires_at IS NOT NULL THEN 'running' ELSE 'waiting' END, attempts_made, coalesce(last_error, '-'))
FROM sweep GROUP BY processed_at IS NOT NULL, failed_at IS NOT NULL, lease_expires_at IS NOT NULL, attempts_made, last_error
ORDER BY 1`), []string{
		"10 processed attempts=1 error=-",
		"2500 waiting attempts=2 error=boom",
		"3 waiting attempts=0 error=-",
	})

	n, err = admin.RetryAllFailed(ctx, s.Pool, load(t, s, "sweep"), nil)
	if err != nil || n != 0 {
		t.Errorf("RetryAllFailed with none failed = %d, %v; want 0", n, err)
	}
}
