package dispatcher_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/backoff"
	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/internal/netfault"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// A dispatcher cut off from the database (every connection through a netfault link closed, new ones
// refused) for longer than the lease, with the outcome of a job it finished waiting: once the link
// heals, the outcome is written and the job runs once, although its lease ran out on the database's
// clock meanwhile, and before the dispatcher claims a job enqueued during the cut. The rescuer waits
// until the dispatcher has reached the database for its quiet period (2 x HeartbeatInterval + 1 s)
// after the heal, then still takes back the lease of a worker that died during the cut.
func TestOutageLongerThanLeaseRunsNothingTwice(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	ctx := context.Background()
	kind := jobinfo.MustDefine[plainJob]("outage_job", jobinfo.Backoff(backoff.Constant(time.Millisecond)))
	createKind(t, b.db, kind)
	live, _ := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 1})
	dead, _ := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 2})
	// Claimed by a worker that dies: its lease runs out during the cut.
	if _, err := b.db.Exec(ctx, `UPDATE outage_job SET started_at = now(), lease_owner = 'crashed-node', lock_token = 1,
		lease_expires_at = now() + interval '1 second', attempts_made = 1 WHERE id = $1`, dead.ID); err != nil {
		t.Fatal(err)
	}

	link, pool := poolThroughLink(t, b.db)

	const (
		lease  = 1500 * time.Millisecond
		rescue = 100 * time.Millisecond
		quiet  = 2*lease/3 + time.Second // 2 x HeartbeatInterval (a third of the lease) + 1 s
	)
	type call struct {
		id      int64
		attempt int
		at      time.Time
	}
	var mu sync.Mutex
	var calls []call
	started, release := make(chan struct{}), make(chan struct{})
	cfg := b.cfg
	cfg.DB, cfg.LeaseTTL, cfg.RescueInterval = pool, lease, rescue
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[plainJob]) error {
			mu.Lock()
			calls = append(calls, call{j.ID, j.Attempt, time.Now()})
			mu.Unlock()
			if j.ID == live.ID && j.Attempt == 1 {
				close(started)
				<-release
			}
			return nil
		})
	})
	<-started
	if err := link.Cut(); err != nil {
		t.Fatal(err)
	}
	close(release) // its outcome now waits for the database
	waitFor(t, "both leases to run out on the database's clock", 10*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "outage_job", "lease_expires_at < now()") == 2, nil
	})
	fresh, err := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 3})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(lease) // well past them: the rescuer would have taken both back at once
	healed := time.Now()
	if err := link.Heal(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the jobs processed", quiet+10*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "outage_job", "processed_at IS NOT NULL") == 3, nil
	})

	if st := readState(t, b.db, "outage_job", live.ID); st != (rowState{Attempts: 1, Processed: true}) {
		t.Errorf("the live worker's job: %+v; want processed on attempt 1", st)
	}
	want := rowState{Attempts: 2, Processed: true, LastError: "lease expired: crashed-node stopped renewing it (worker died or stalled)"}
	if st := readState(t, b.db, "outage_job", dead.ID); st != want {
		t.Errorf("the dead worker's job: %+v; want %+v", st, want)
	}
	mu.Lock()
	defer mu.Unlock()
	var ran []string
	for _, c := range calls {
		ran = append(ran, fmt.Sprintf("job %d attempt %d", c.id, c.attempt))
	}
	byJob := map[int64]call{}
	for _, c := range calls {
		byJob[c.id] = c
	}
	if len(calls) != 3 || calls[0].id != live.ID || byJob[dead.ID].attempt != 2 || byJob[fresh.ID].attempt != 1 {
		t.Fatalf("handler calls %v; want the live job's (%d) once, then the dead worker's job (%d) on attempt 2 and the job enqueued during the cut (%d) once",
			ran, live.ID, dead.ID, fresh.ID)
	}
	var claimedAfter bool
	if err := b.db.QueryRow(ctx, `SELECT (SELECT started_at FROM outage_job WHERE id = $1) > (SELECT processed_at FROM outage_job WHERE id = $2)`,
		fresh.ID, live.ID).Scan(&claimedAfter); err != nil {
		t.Fatal(err)
	}
	if !claimedAfter {
		t.Errorf("the job enqueued during the cut was claimed before the waiting outcome was written")
	}
	// The rescue came after the quiet period, counted from the heal at the earliest, and within the
	// documented bound (quiet + 3 RescueIntervals), plus a second for a loaded machine.
	after := byJob[dead.ID].at.Sub(healed)
	t.Logf("the dead worker's job ran again %v after the heal", after)
	if after < quiet || after > quiet+3*rescue+time.Second {
		t.Errorf("the dead worker's job ran again %v after the heal; want after the quiet period %v, within %v", after, quiet, quiet+3*rescue+time.Second)
	}
	if st := d.Stats(); st.Rescued != 1 || st.StaleFinishes != 0 || st.Processed != 3 {
		t.Errorf("stats %+v; want 1 rescued, 3 processed, no stale finish", st)
	}
}

// Stop does not wait for the database to take outcomes past its deadline: with the link to the
// database cut, a finished job's outcome is given up when Stop's context ends (its lease is left for
// the rescuer), and Stop returns with the deadline reported.
func TestStopGivesUpOutcomesAtItsDeadlineWhileTheDatabaseIsUnreachable(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	ctx := context.Background()
	kind := jobinfo.MustDefine[plainJob]("stop_outage_job")
	createKind(t, b.db, kind)
	job, _ := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 1})
	link, pool := poolThroughLink(t, b.db)
	started, release := make(chan struct{}), make(chan struct{})
	cfg := b.cfg
	cfg.DB, cfg.LeaseTTL = pool, 6*time.Second // far longer than Stop's deadline
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[plainJob]) error {
			close(started)
			<-release
			return nil
		})
	})
	<-started
	if err := link.Cut(); err != nil {
		t.Fatal(err)
	}
	close(release)
	const deadline = 500 * time.Millisecond
	stopCtx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	began := time.Now()
	err := d.Stop(stopCtx)
	took := time.Since(began)
	if want := "dispatcher: Stop: running jobs were cancelled at the deadline: context deadline exceeded"; err == nil || err.Error() != want {
		t.Errorf("Stop = %v; want %q", err, want)
	}
	if took > deadline+2*time.Second {
		t.Errorf("Stop took %v with a deadline of %v", took, deadline)
	}
	if n := countWhere(t, b.db, "stop_outage_job", "lease_expires_at IS NOT NULL AND processed_at IS NULL"); n != 1 {
		t.Errorf("%d rows leased and not processed after Stop; want the job's (%d), left for the rescuer", n, job.ID)
	}
	if st := d.Stats(); st.Processed != 0 || st.StaleFinishes != 1 {
		t.Errorf("stats %+v; want nothing processed, the given-up outcome counted stale", st)
	}
}

// poolThroughLink returns a pool like db's (its search_path included) whose connections go through a
// netfault link to db's server, and the link; both are closed when t ends.
func poolThroughLink(t *testing.T, db *pgxpool.Pool) (*netfault.Link, *pgxpool.Pool) {
	t.Helper()
	pc := db.Config()
	link, err := netfault.Start("postgres", net.JoinHostPort(pc.ConnConfig.Host, strconv.Itoa(int(pc.ConnConfig.Port))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	host, port, err := net.SplitHostPort(link.Addr())
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	pc.ConnConfig.Host, pc.ConnConfig.Port, pc.MaxConns = host, uint16(p), 4
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return link, pool
}
