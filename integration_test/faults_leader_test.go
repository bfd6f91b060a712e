package integration_test

// The fault scenario of the maintenance leader (11 in docs/reliability.md): the worker that holds
// every maintenance lease stopped in the middle of a schedule round. Its stale finish comes while
// the job's retry still holds the row: without the fence on finishes (the row's token, I1), that
// write would send the row back to wait under the retry, and faultkit.CheckAudit fails it.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
	"github.com/jobpipe/jobpipe/internal/testenv"
)

// The worker that leads maintenance, every lease in jobpipe_leaders (the rescue of the keyed kind and
// of mp_tick, mp_tick's pruning, and the schedule mp_tick, which fires every second), is stopped
// (SIGSTOP) in the middle of a schedule round, the worst moment: the round has enqueued its instant's
// job and holds the schedule's row. It stays stopped 8 s, past its leases (2 s) and its jobs' (3 s),
// while two other workers run a steady keyed load (60 jobs/s over 40 blogs). They take every lease
// over: the server ends the stopped round once its time is up, the schedule keeps firing each second,
// and the stopped leader's jobs (one whose handler blocks until released, and what it held of the
// load) are rescued by the new rescue leader and run again. Woken, the stopped worker does nothing
// stale: its round committed nothing, it fires and rescues nothing while another leads, and its
// jobs' finishes are refused, the blocked job's while its retry still holds the row. Over the whole
// run every second has exactly one firing and one job.
func TestFault11LeaderStalled(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	const (
		leaseTTL   = 3 * time.Second
		rescue     = 200 * time.Millisecond
		leaderTTL  = 2 * time.Second
		retryDelay = 500 * time.Millisecond
		rate       = 60.0 // keyed jobs offered per second
		blogs      = 40
		window     = 6 * time.Second
		stall      = 8 * time.Second
		tick       = "mp_tick"
		// How late an instant may fire: within the lease's lapse and a renewal or two of the new leader.
		maxLag = leaderTTL + 2*time.Second
	)
	leases := faultkit.Leases{TTL: leaseTTL, Rescue: rescue, LeaderTTL: leaderTTL, Poll: 200 * time.Millisecond, RetryDelay: retryDelay}

	// Arranged: the leader holds every maintenance lease and runs a blocked job; two other workers
	// join it under a steady keyed load.
	sc := arrangeLeaderOfEverything(t, leases, tick)
	stopLoad := faultkit.StartSteadyLoad(t, rate, faultkit.KeyedJobs(sc.e, 1, blogs, &sc.ids))
	time.Sleep(time.Second)
	before := faultkit.Measure(t, sc.e, window)
	if !sc.leadsAll(t) {
		t.Fatalf("before the stall the leases are held by %v; want every one by %s", faultkit.LeaseHolders(t, sc.e.DB), sc.leader.Name)
	}

	// Injected: the leader stopped inside a schedule round for 8 s, then woken.
	st := sc.stallInRound(t, stall)
	sc.waitStaleFinishThenRelease(t)
	after := faultkit.Measure(t, sc.e, window)
	sent := stopLoad()
	keyedIDs, tickIDs := sc.drain(t)

	// What must hold: nothing lost, no duplicate, one holder of a key at a time; every lease taken
	// over in time; one firing per second, none stale; the leader's jobs rescued by the others alone.
	e := sc.e
	keyedAudit := faultkit.CheckAudit(t, e.DB, faultkit.KeyedKind, "")
	tickAudit := faultkit.CheckAudit(t, e.DB, tick, tick)
	lost, dups := faultkit.CheckLostAndDuplicates(t, e.DB, faultkit.KeyedKind, "", keyedIDs, nil)
	lostTicks, dupTicks := faultkit.CheckLostAndDuplicates(t, e.DB, tick, tick, tickIDs, nil)
	holders := faultkit.CheckKeyHolders(t, e.DB, 1)
	takeover := sc.checkLeasesTakenOver(t, st, leaderTTL)
	f := sc.checkOneFiringPerSecond(t, st, stall, maxLag, len(tickIDs))
	fromLeader, staleRescues := sc.checkStalledJobsRescued(t, st)
	firstByOthers := sc.firstFiringByOthers(t, st)
	faultkit.ReportFigures(t, "11 leader stalled",
		"throughput_before", before.Rate(t, e.DB, ""), "throughput_during", st.during.Rate(t, e.DB, ""),
		"throughput_after", after.Rate(t, e.DB, ""), "offered", rate,
		"recovery", firstByOthers.Sub(st.stoppedAt), "stalled_for", st.resumedAt.Sub(st.stoppedAt), "leases_taken_over_within", takeover,
		"firings", f.firings, "fired_by_others_in_stall", f.byOthersInStall, "firing_lag_max_in_stall", f.stallLag, "firing_lag_max", f.maxLagSeen,
		"stale_firings", f.staleFirings, "stalled_jobs_rescued", fromLeader, "stale_rescues", staleRescues,
		"rescues", keyedAudit.Rescues+tickAudit.Rescues, "duplicates", dups+dupTicks, "lost", lost+lostTicks, "jobs", sent+1+len(tickIDs),
		"key_holders_max", holders)
}

// leaderOfEverything is scenario 11's world: the leader, which holds every maintenance lease and
// runs the blocked job, the two other workers, and the logs of writes, leases and firings.
type leaderOfEverything struct {
	e          *faultkit.World
	tick       string // the schedule's kind and name
	apps       faultkit.AppNames
	blocked    int64
	leaseNames []string // the maintenance leases the leader holds
	leader     *faultkit.Worker
	others     []*faultkit.Worker
	all        []*faultkit.Worker // the leader, then the others
	ids        faultkit.IDs       // the load's jobs
}

// arrangeLeaderOfEverything starts the leader alone, so that it takes every lease and the blocked
// job, then the two others.
func arrangeLeaderOfEverything(t *testing.T, leases faultkit.Leases, tick string) *leaderOfEverything {
	t.Helper()
	ctx := context.Background()
	faultkit.Reserve(t, 3)
	r := testenv.NewRedis(t)
	e := faultkit.NewWorld(t, leases.RetryDelay, r.Addrs, r.Clients, r.Prefix)
	tickKind, err := faultkit.DefineTickKind(tick)
	if err != nil {
		t.Fatal(err)
	}
	faultkit.CreateKindTable(t, e, tickKind)
	for _, k := range []string{faultkit.KeyedKind, tick} {
		faultkit.InstallAudit(t, e.DB, e.Schema.Name, k)
		faultkit.InstallWriteLog(t, e.DB, e.Schema.Name, k)
	}
	faultkit.InstallLeaderLog(t, e, tick)
	const blockedBlog = 1001
	blocked, err := dispatcher.Enqueue(ctx, e.DB, e.Kind, faultkit.KeyedJob{BlogID: blockedBlog})
	if err != nil {
		t.Fatal(err)
	}
	sc := &leaderOfEverything{e: e, tick: tick, apps: faultkit.NewAppNames(), blocked: blocked.ID}
	settings := func(node string) faultkit.WorkerSettings {
		s := sc.apps.Settings(t, e, node)
		s.BlockBlogs = []int64{blockedBlog} // every attempt, until released; by blog, so that the tick job of its id does not block
		s.SleepMin, s.SleepMax = 2*time.Millisecond, 5*time.Millisecond
		leases.Apply(&s)
		s.TickKind = tick
		return s
	}
	sc.leader = faultkit.StartWorker(t, settings("leader"))
	sc.leaseNames = []string{"rescue:" + faultkit.KeyedKind, "rescue:" + tick, "prune:" + tick, "schedule:" + tick}
	faultkit.WaitFor(t, "the leader to hold every lease and run the blocked job", 60*time.Second, func() bool {
		return sc.leadsAll(t) && faultkit.CallCount(t, e.DB, "", sc.blocked) == 1
	})
	sc.others = []*faultkit.Worker{faultkit.StartWorker(t, settings("w2")), faultkit.StartWorker(t, settings("w3"))}
	sc.all = append([]*faultkit.Worker{sc.leader}, sc.others...)
	faultkit.WaitReady(t, 60*time.Second, sc.others...)
	return sc
}

// leadsAll tells whether the leader holds every maintenance lease.
func (sc *leaderOfEverything) leadsAll(t *testing.T) bool {
	t.Helper()
	held := faultkit.LeaseHolders(t, sc.e.DB)
	for _, l := range sc.leaseNames {
		if held[l] != sc.leader.Name {
			return false
		}
	}
	return true
}

// leaderStall is what became of the leader's stall.
type leaderStall struct {
	stoppedAt, resumedAt time.Time
	heldInStall          map[string]string // each lease's holder late in the stall
	during               faultkit.Window
}

// stallInRound stops the leader (SIGSTOP) inside a schedule round and continues it (SIGCONT) once
// stall has passed.
func (sc *leaderOfEverything) stallInRound(t *testing.T, stall time.Duration) leaderStall {
	t.Helper()
	e := sc.e
	stoppedAt, resume := faultkit.StopInScheduleRound(t, e, sc.leader, sc.apps.App(sc.leader.Name))
	faultkit.SleepUntil(t, e, stoppedAt.Add(stall))
	faultkit.CheckAlive(t, "during the stall", sc.all...)
	heldInStall := faultkit.LeaseHolders(t, e.DB)
	resumedAt := e.Now(t)
	resume()
	return leaderStall{stoppedAt: stoppedAt, resumedAt: resumedAt, heldInStall: heldInStall, during: faultkit.Window{From: stoppedAt, To: resumedAt}}
}

// waitStaleFinishThenRelease waits until the woken leader has abandoned the blocked job (its lease
// is gone) and sent its finish while the retry still holds the row, then lets the retry end. The
// finish statement under way when the handler ended may not carry it, the next one does.
func (sc *leaderOfEverything) waitStaleFinishThenRelease(t *testing.T) {
	t.Helper()
	e := sc.e
	var abandoned time.Time
	faultkit.WaitFor(t, "the stalled worker to abandon the blocked job", 30*time.Second, func() bool {
		calls := faultkit.Calls(t, e.DB, "", sc.blocked)
		if len(calls) == 0 || calls[0].EndedAt == nil {
			return false
		}
		abandoned = *calls[0].EndedAt
		return true
	})
	faultkit.WaitFor(t, "the stalled worker's finish of the blocked job", 30*time.Second, func() bool {
		return len(faultkit.Writes(t, e.DB, faultkit.KeyedKind, sc.apps.App(sc.leader.Name), abandoned, "finish")) >= 2
	})
	e.Release(t, sc.blocked)
}

// drain waits until every job of both kinds has finished and stops the workers (SIGTERM). It returns
// the ids of the keyed kind's jobs and of the schedule's.
func (sc *leaderOfEverything) drain(t *testing.T) (keyedIDs, tickIDs []int64) {
	t.Helper()
	e := sc.e
	keyedIDs = append(sc.ids.All(), sc.blocked)
	faultkit.WaitFinished(t, e.DB, faultkit.KeyedKind, keyedIDs, 60*time.Second)
	rows, err := e.DB.Query(context.Background(), `SELECT id FROM mp_tick`)
	if err != nil {
		t.Fatal(err)
	}
	if tickIDs, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		t.Fatal(err)
	}
	faultkit.WaitFinished(t, e.DB, sc.tick, tickIDs, 60*time.Second)
	faultkit.CheckAlive(t, "after the stall", sc.all...)
	faultkit.Terminate(t, sc.all...)
	e.CheckQuiet(t)
	return keyedIDs, tickIDs
}

// checkLeasesTakenOver checks that every lease passed to another node within its lapse and a
// renewal or two, and was held by another late in the stall. It returns the longest takeover.
func (sc *leaderOfEverything) checkLeasesTakenOver(t *testing.T, st leaderStall, leaderTTL time.Duration) time.Duration {
	t.Helper()
	var takeover time.Duration
	for _, l := range sc.leaseNames {
		var holder string
		var at time.Time
		if err := sc.e.DB.QueryRow(context.Background(), `SELECT holder, at FROM wf_leaders WHERE name = $1 AND at > $2 ORDER BY n LIMIT 1`, l, st.stoppedAt).
			Scan(&holder, &at); err != nil || holder == sc.leader.Name || at.After(st.stoppedAt.Add(leaderTTL+time.Second)) {
			t.Errorf("lease %s after the stall: first taken by %q at %v after the stop (%v); want another node within %v",
				l, holder, at.Sub(st.stoppedAt), err, leaderTTL+time.Second)
		}
		takeover = max(takeover, at.Sub(st.stoppedAt))
		if h := st.heldInStall[l]; h == "" || h == sc.leader.Name {
			t.Errorf("lease %s late in the stall held by %q; want another node", l, h)
		}
	}
	return takeover
}

// firingFigures is what the schedule's firings showed.
type firingFigures struct {
	firings, byOthersInStall, staleFirings int
	stallLag, maxLagSeen                   time.Duration // the latest firing in the stall, and in all
}

// checkOneFiringPerSecond checks the schedule: one firing and one job for every second of the run,
// each fired on time but for the change of leader, by the other nodes during the stall, and none by
// the stalled one once it had lost the lease, but after it took it back.
func (sc *leaderOfEverything) checkOneFiringPerSecond(t *testing.T, st leaderStall, stall, maxLag time.Duration, tickJobs int) firingFigures {
	t.Helper()
	ctx, e := context.Background(), sc.e
	leaderApp := sc.apps.App(sc.leader.Name)
	rows, err := e.DB.Query(ctx, `SELECT f.instant, f.job_id, j.process_after, j.attempts_made, coalesce(w.app, ''), w.at
		FROM jobpipe_schedule_firings f LEFT JOIN mp_tick j ON j.id = f.job_id LEFT JOIN wf_firings w ON w.instant = f.instant
		WHERE f.name = $1 ORDER BY f.instant`, sc.tick)
	if err != nil {
		t.Fatal(err)
	}
	type firing struct {
		instant      time.Time
		job          int64
		processAfter *time.Time
		attempts     *int
		app          string
		at           *time.Time
	}
	firings, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (firing, error) {
		var f firing
		return f, r.Scan(&f.instant, &f.job, &f.processAfter, &f.attempts, &f.app, &f.at)
	})
	if err != nil {
		t.Fatal(err)
	}
	var leaderBack *time.Time
	if err := e.DB.QueryRow(ctx, `SELECT min(at) FROM wf_leaders WHERE name = $1 AND holder = $2 AND at > $3`,
		"schedule:"+sc.tick, sc.leader.Name, st.stoppedAt).Scan(&leaderBack); err != nil {
		t.Fatal(err)
	}
	if leaderBack != nil {
		t.Logf("note: the stalled worker took the schedule's lease back at %v, %v after it woke", leaderBack, leaderBack.Sub(st.resumedAt))
	}
	ff := firingFigures{firings: len(firings)}
	for i, f := range firings {
		if want := firings[0].instant.Add(time.Duration(i) * time.Second); !f.instant.Equal(want) {
			t.Fatalf("firing %d is for %s, want %s: an instant is missing", i, f.instant, want)
		}
		// A job's process_after is its instant, unless a retry (after the stalled worker lost it) moved it on.
		if f.processAfter == nil || f.attempts == nil || (*f.attempts == 1 && !f.processAfter.Equal(f.instant)) || f.at == nil {
			t.Errorf("instant %s: job %d's process_after %v (attempts %v), fired at %v", f.instant, f.job, f.processAfter, f.attempts, f.at)
			continue
		}
		lag := f.at.Sub(f.instant)
		ff.maxLagSeen = max(ff.maxLagSeen, lag)
		if lag > maxLag {
			t.Errorf("instant %s fired %v late by %s; want within %v", f.instant.Format("15:04:05"), lag, sc.apps.Node(f.app), maxLag)
		}
		if !f.at.Before(st.stoppedAt) && f.at.Before(st.resumedAt) {
			ff.stallLag = max(ff.stallLag, lag)
			if f.app != leaderApp {
				ff.byOthersInStall++
			}
		}
		if f.app == leaderApp && !f.at.Before(st.stoppedAt) && (leaderBack == nil || f.at.Before(*leaderBack)) {
			ff.staleFirings++
			t.Errorf("instant %s fired by the stalled worker at %v, after it stopped and without the lease", f.instant, f.at)
		}
	}
	if want := int(stall/time.Second) - 3; ff.byOthersInStall < want {
		t.Errorf("%d instants fired by the other nodes during the %v stall; want at least %d", ff.byOthersInStall, stall, want)
	}
	if len(firings) < 20 || tickJobs != len(firings) || faultkit.QueryCount(t, e.DB, `SELECT count(DISTINCT job_id) FROM jobpipe_schedule_firings`) != len(firings) {
		t.Errorf("%d firings, %d jobs of the schedule's kind: want one job per instant, over 20 s at least", len(firings), tickJobs)
	}
	var fired int64
	for _, w := range sc.all {
		if ws := w.Stats(); ws != nil {
			fired += ws.ScheduleFired
		}
	}
	if fired != int64(len(firings)) {
		t.Errorf("the workers counted %d instants fired, the table has %d firings", fired, len(firings))
	}
	return ff
}

// checkStalledJobsRescued checks that the stalled leader's jobs were rescued by the new rescue
// leader during the stall, once each, and that the stalled worker, woken, rescued nothing; that the
// blocked job's attempt in the leader was abandoned once it woke, and retried elsewhere. It returns
// how many of the leader's jobs were rescued, and the rows the leader's own rescues changed.
func (sc *leaderOfEverything) checkStalledJobsRescued(t *testing.T, st leaderStall) (fromLeader, staleRescues int) {
	t.Helper()
	e, leader := sc.e, sc.leader
	var rescuedByOthers int
	for _, k := range []string{faultkit.KeyedKind, sc.tick} {
		for _, w := range sc.others {
			rescuedByOthers += faultkit.RowsChanged(faultkit.Writes(t, e.DB, k, sc.apps.App(w.Name), st.stoppedAt, "rescue"))
		}
		staleRescues += faultkit.RowsChanged(faultkit.Writes(t, e.DB, k, sc.apps.App(leader.Name), st.stoppedAt, "rescue"))
	}
	fromLeader = faultkit.CountRescues(t, e.DB, faultkit.KeyedKind, " AND old_owner = $2", leader.Name) + faultkit.CountRescues(t, e.DB, sc.tick, " AND old_owner = $2", leader.Name)
	if staleRescues != 0 || rescuedByOthers < fromLeader || fromLeader < 1 {
		t.Errorf("after the stop: the other nodes' rescues took %d jobs, the stalled worker's %d; the stalled worker's jobs rescued: %d",
			rescuedByOthers, staleRescues, fromLeader)
	}
	if n := faultkit.QueryCount(t, e.DB, `SELECT count(*) FROM (SELECT 1 FROM fault_audit WHERE old_state = 'running' AND new_token > old_token
		GROUP BY kind, job_id, old_token HAVING count(*) > 1) x`); n != 0 {
		t.Errorf("%d leases rescued more than once", n)
	}
	calls := faultkit.Calls(t, e.DB, "", sc.blocked)
	if len(calls) != 2 || calls[0].Pid != leader.Pid || calls[0].EndedAt == nil || !calls[0].EndedAt.After(st.resumedAt) ||
		calls[0].Outcome == nil || !strings.HasPrefix(*calls[0].Outcome, dispatcher.ErrLeaseLost.Error()) ||
		calls[1].Pid == leader.Pid || calls[1].Attempt != 2 || calls[1].Outcome == nil || *calls[1].Outcome != "ok" || !calls[1].StartedAt.Before(st.resumedAt) {
		t.Errorf("the blocked job's calls %v; want the stalled worker's abandoned once it woke, and a retry elsewhere during the stall", calls)
	}
	if row := e.Row(t, sc.blocked); !row.Processed || row.Attempts != 2 {
		t.Errorf("the blocked job's row %+v; want processed on attempt 2", row)
	}
	// The blocked job lost its lease (its ledger says so, above) and its row moved on: a stale finish.
	if ls := leader.Stats(); ls == nil || ls.StaleFinishes < 1 {
		t.Errorf("the stalled worker's stats %+v; want its refused finishes counted", ls)
	}
	return fromLeader, staleRescues
}

// firstFiringByOthers is when a node other than the stalled leader first fired the schedule after
// the stop.
func (sc *leaderOfEverything) firstFiringByOthers(t *testing.T, st leaderStall) time.Time {
	t.Helper()
	var firstByOthers time.Time
	if err := sc.e.DB.QueryRow(context.Background(), `SELECT min(at) FROM wf_firings WHERE app <> $1 AND at > $2`,
		sc.apps.App(sc.leader.Name), st.stoppedAt).Scan(&firstByOthers); err != nil {
		t.Fatal(err)
	}
	return firstByOthers
}
