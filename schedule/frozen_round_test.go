package schedule_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/schedule"
)

// A node frozen in the middle of a round (its process stopped, its VM paused) can neither finish the
// round nor cancel it, and its transaction holds the schedule's row. The next leader's round must not
// wait for it to wake: the server ends the frozen round once its context's time is up, the next round
// fires the instants (the frozen round's included: its job and firing were never committed), and the
// frozen round, when it wakes, commits nothing.
func TestScheduleFireFrozenRoundDoesNotBlockTheNext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := setup(t)
	save(t, db, schedule.Spec{Name: "tick", Cron: "* * * * * *", CatchUp: schedule.CatchUpAll}, "")
	// An instant is due now, so that the frozen round enqueues a job.
	if _, err := db.Exec(ctx, `UPDATE jobpipe_schedules SET next_run_at = date_trunc('second', now()) - interval '2 seconds'`); err != nil {
		t.Fatal(err)
	}
	const frozenFor = 8 * time.Second
	entered, wake := make(chan struct{}), make(chan struct{})
	var enterOnce, wakeOnce sync.Once
	wakeUp := func() { wakeOnce.Do(func() { close(wake) }) }
	defer wakeUp()
	frozen := make(chan error, 1)
	go func() {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := schedule.Fire(c, db, "tick", schedule.MaxPerRound, func(ctx context.Context, tx pgx.Tx, at time.Time) (int64, error) {
			id, err := enqueue(ctx, tx, at)
			enterOnce.Do(func() {
				close(entered)
				<-wake // frozen: the round neither goes on nor gives up
			})
			return id, err
		})
		frozen <- err
	}()
	<-entered
	timer := time.AfterFunc(frozenFor, wakeUp)
	defer timer.Stop()

	began := time.Now()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := schedule.Fire(c, db, "tick", schedule.MaxPerRound, enqueue)
	took := time.Since(began)
	wakeUp()
	if err != nil {
		t.Fatalf("the next round: %v", err)
	}
	if took > frozenFor/2 {
		t.Errorf("the next round took %v: it waited for the frozen round (frozen for %v) instead of going on once that round's time was up", took.Round(time.Millisecond), frozenFor)
	}
	if err := <-frozen; err == nil {
		t.Errorf("the frozen round committed when it woke, after the next round had run")
	}
	firings, jobs := firingRows(t, db, "tick"), jobRows(t, db)
	if len(r.Fired) < 2 || len(firings) != len(r.Fired) || len(jobs) != len(r.Fired) {
		t.Fatalf("the next round fired %d instants; %d firings, %d jobs in all: want every due instant fired once, by it", len(r.Fired), len(firings), len(jobs))
	}
	for _, f := range r.Fired {
		if firings[f.At.UTC()] != f.JobID || !jobs[f.JobID].Equal(f.At.UTC()) {
			t.Errorf("instant %s: firing's job %d, job %d's instant %s", f.At, firings[f.At.UTC()], f.JobID, jobs[f.JobID])
		}
	}
	t.Logf("the next round ran %v after the frozen one began to wait, and fired %d instants", took.Round(time.Millisecond), len(r.Fired))
}
