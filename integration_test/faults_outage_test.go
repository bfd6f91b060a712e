package integration_test

// The PostgreSQL outage scenarios: the server stopped for longer than the lease, then started again.
// 17: a worker that stays alive throughout runs nothing twice, although the leases of the jobs it had
// finished ran out on the database's clock while the outcomes waited for the server. 18: the jobs of
// a worker killed during the outage are still taken back once the server is up, within the bound
// that docs/reliability.md states. Each runs its own PostgreSQL cluster (internal/pgproc), with the
// ledger on a second one that stays up, as in scenario 9.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
)

// The outage scenarios' lease, short so that an outage of several leases takes seconds, and what
// follows from it with the dispatcher's defaults: HeartbeatInterval is a third of the lease, and the
// rescuer waits twice that plus a second after it reaches the database again (dispatcher.Config).
const (
	outageLeaseTTL       = 3 * time.Second
	outageHeartbeat      = outageLeaseTTL / 3
	rescueQuiet          = 2*outageHeartbeat + time.Second
	outageRescueInterval = time.Second // NewPostgresWorld's
	outageLeaderTTL      = 2 * time.Second
	outageLength         = 3 * outageLeaseTTL
)

// TestFault17PostgresOutageLongerThanLease stops the private PostgreSQL cluster (fast mode) for three
// leases under a steady load worked by one worker process, and starts it again. Outcomes of jobs
// whose handlers returned just before or during the outage wait in the worker for the server; their
// leases run out on the database's clock meanwhile. None may be taken back by a rescue that only the
// outage caused: no job's handler is called twice (the ledger), none is lost, and some outcomes were
// indeed recorded after their lease had run out (the scenario tested what it means to).
func TestFault17PostgresOutageLongerThanLease(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	const scenario = "17 PostgreSQL down longer than the lease"

	// Arranged: one worker under a steady offered load; its baseline. The load comes every 50 ms, and
	// handlers of 20 to 80 ms keep jobs of more than one of its batches running at every moment, whose
	// outcomes the stop meets: with handlers shorter than a batch's interval, a stop could fall
	// where every job of the last batch had finished and been recorded.
	e := faultkit.NewPostgresWorld(t, faultkit.PostgresOptions{Workers: 1, Concurrency: 32, LedgerElsewhere: true, LeaseTTL: outageLeaseTTL,
		Tune: func(s *faultkit.WorkerSettings) { s.SleepMin, s.SleepMax = 20*time.Millisecond, 80*time.Millisecond }})
	load := e.StartLoad(300, 50)
	time.Sleep(warmUpBeforeBaseline)
	b0, _, base := e.MeasureRates(t, 4*time.Second)
	ref := load.Reference(base)

	// Injected: the server stopped for three leases.
	down, up := e.Outage(t, outageLength, nil)
	e.CheckAlive(t, "right after the outage")
	time.Sleep(time.Until(up.Add(10*time.Second + 500*time.Millisecond)))
	e.CheckAlive(t, "10 s after the outage")
	backPlain, backKeyed, _ := e.Recovery(t, up, ref, 0.9)
	after := e.Rates(t, up.Add(5*time.Second), up.Add(10*time.Second))
	v := e.End(t, load, b0)

	// What must hold: no handler called twice, nothing run to ok twice, and outcomes recorded after
	// their lease had run out (the outage met what it tests); everything End checks.
	twice := calledTwice(t, e)
	late := recordedAfterLease(t, e, down, up)
	if len(twice) != 0 {
		t.Errorf("%d jobs' handlers were called more than once (kind, job, calls, tokens): %v; want none", len(twice), twice)
	}
	if d := v.Plain.Duplicates + v.Keyed.Duplicates; d != 0 {
		t.Errorf("%d jobs ran to ok more than once; want none", d)
	}
	if late == 0 {
		t.Errorf("no outcome was recorded after its lease had run out during the outage: the scenario did not test what it means to")
	}
	faultkit.ReportFigures(t, scenario, append([]any{
		"lease", outageLeaseTTL, "down", up.Sub(down),
		"baseline plain/s", base.Plain, "baseline keyed/s", base.Keyed,
		"back to 90% plain", backPlain, "back to 90% keyed", backKeyed,
		"after plain/s", after.Plain, "after keyed/s", after.Keyed,
		"outcomes recorded after their lease ran out", late, "jobs called twice", len(twice),
	}, v.Figures()...)...)
}

// TestFault18WorkerKilledDuringOutage has a worker hold three keyed jobs (their handlers block) while
// another works a steady load, stops the private PostgreSQL cluster for three leases, kills the
// holder (SIGKILL) a second into the outage, and starts the server again. The killed worker's jobs
// must be taken back and run again by the survivor, after the rescuer has reached the server for its
// quiet period (2 x HeartbeatInterval + 1 s, and the server up that long), and within the bound
// docs/reliability.md gives: that quiet period and three RescueIntervals after the server is back
// (with a second more for statements on a loaded machine). The killed worker led the keyed kind's
// rescue; its leadership ran out during the outage. Nothing else runs twice and nothing is lost.
func TestFault18WorkerKilledDuringOutage(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	const scenario = "18 worker killed during a PostgreSQL outage"
	blogs := []int64{9001, 9002, 9003}

	// Arranged: the victim holds three blocked keyed jobs and leads the keyed kind's rescue; the
	// survivor works a steady load.
	sc := arrangeVictimBesideSurvivor(t, blogs)
	e := sc.e
	load := e.StartLoad(100, 20)
	time.Sleep(warmUpBeforeBaseline)
	b0 := time.Now()
	sc.checkVictimLeadsRescue(t)

	// Injected: the server stopped for three leases, the victim killed a second into the outage.
	var killedAt time.Time
	down, up := e.Outage(t, outageLength, func() {
		time.Sleep(time.Second)
		sc.victim.Kill(t)
		killedAt = time.Now()
	})
	e.Workers = []*faultkit.Worker{sc.survivor}
	e.CheckAlive(t, "right after the outage")
	bound := rescueQuiet + 3*outageRescueInterval
	faultkit.WaitFor(t, "the killed worker's jobs to be processed", bound+30*time.Second, func() bool {
		return e.Count(t, fmt.Sprintf("id = ANY ('{%d,%d,%d}') AND processed_at IS NOT NULL", sc.held[0], sc.held[1], sc.held[2])) == len(sc.held)
	})

	// What must hold: the victim's jobs rescued once the rescuer's quiet period had passed, within
	// the bound, and run again on attempt 2; nothing else called twice; everything End checks.
	latest := sc.checkRescuedAfterQuietPeriod(t, up, bound)
	sc.checkKilledAttemptsStillCounted(t)
	v := e.End(t, load, b0)
	sc.checkOnlyVictimsJobsRanTwice(t)
	if d := v.Plain.Duplicates + v.Keyed.Duplicates; d != 0 {
		t.Errorf("%d jobs ran to ok more than once; want none", d)
	}
	faultkit.ReportFigures(t, scenario, append([]any{
		"lease", outageLeaseTTL, "down", up.Sub(down), "killed into the outage", killedAt.Sub(down),
		"quiet period", rescueQuiet, "bound", bound, "rescued after the server was back (latest)", latest,
	}, v.Figures()...)...)
}

// victimBesideSurvivor is scenario 18's world: the victim, which holds the blocked keyed jobs, and
// the survivor.
type victimBesideSurvivor struct {
	e                *faultkit.PostgresWorld
	blogs            []int64 // the blocked jobs' blogs
	held             []int64 // the blocked jobs
	victim, survivor *faultkit.Worker
}

// arrangeVictimBesideSurvivor starts the victim, which works the keyed kind alone, its 3 slots held
// by the blocked jobs: it has nothing else to lose, so that everything that runs twice is one of
// them. Then the survivor.
func arrangeVictimBesideSurvivor(t *testing.T, blogs []int64) *victimBesideSurvivor {
	t.Helper()
	ctx := context.Background()
	e := faultkit.NewPostgresWorld(t, faultkit.PostgresOptions{Later: 2, Concurrency: 3, LedgerElsewhere: true, LeaseTTL: outageLeaseTTL,
		Tune: func(s *faultkit.WorkerSettings) {
			s.BlockBlogs, s.BlockUpToAttempt, s.LeaderTTL = blogs, 1, outageLeaderTTL
		}})
	sc := &victimBesideSurvivor{e: e, blogs: blogs}
	sc.victim = e.StartWorker(t, "victim", func(s *faultkit.WorkerSettings) { s.PlainKind = "" })
	faultkit.WaitReady(t, 60*time.Second, sc.victim)
	for _, b := range blogs {
		res, err := dispatcher.Enqueue(ctx, e.DB, e.Kind, faultkit.KeyedJob{BlogID: b})
		if err != nil {
			t.Fatal(err)
		}
		sc.held = append(sc.held, res.ID)
	}
	faultkit.WaitFor(t, "the victim to hold the blocked jobs", 30*time.Second, func() bool {
		var n int
		if err := e.LedgerDB.QueryRow(ctx, `SELECT count(*) FROM mp_ledger WHERE job_id = ANY ($1) AND kind IS NULL AND node = $2 AND ended_at IS NULL`,
			sc.held, sc.victim.Name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == len(sc.held)
	})
	sc.survivor = e.StartWorker(t, "survivor")
	faultkit.WaitReady(t, 60*time.Second, sc.survivor)
	e.Workers = []*faultkit.Worker{sc.victim, sc.survivor}
	return sc
}

// checkVictimLeadsRescue checks that the victim, which started first, holds the keyed kind's rescue
// lease.
func (sc *victimBesideSurvivor) checkVictimLeadsRescue(t *testing.T) {
	t.Helper()
	var leader string
	if err := sc.e.DB.QueryRow(context.Background(), `SELECT holder FROM jobpipe_leaders WHERE name = $1`, "rescue:"+faultkit.KeyedKind).Scan(&leader); err != nil || leader != sc.victim.Name {
		t.Fatalf("the keyed kind's rescue lease is held by %q (%v); want the victim, which started first", leader, err)
	}
}

// checkRescuedAfterQuietPeriod checks that each of the victim's jobs was rescued once, not before
// the server had been up for the rescuer's quiet period, within bound (and a second) of the server
// being back, and processed on attempt 2. It returns the latest rescue after up.
func (sc *victimBesideSurvivor) checkRescuedAfterQuietPeriod(t *testing.T, up time.Time, bound time.Duration) time.Duration {
	t.Helper()
	ctx, e := context.Background(), sc.e
	var pmStart time.Time
	if err := e.DB.QueryRow(ctx, `SELECT pg_postmaster_start_time()`).Scan(&pmStart); err != nil {
		t.Fatal(err)
	}
	rows, err := e.DB.Query(ctx, `SELECT job_id, min(at) FROM fault_audit WHERE kind = $1 AND job_id = ANY ($2)
		AND old_state = 'running' AND new_state = 'waiting' AND new_token > old_token GROUP BY job_id ORDER BY job_id`, faultkit.KeyedKind, sc.held)
	if err != nil {
		t.Fatal(err)
	}
	type rescue struct {
		Job int64
		At  time.Time
	}
	rescues, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rescue])
	if err != nil {
		t.Fatal(err)
	}
	var latest time.Duration
	for _, r := range rescues {
		latest = max(latest, r.At.Sub(up))
		if r.At.Before(pmStart.Add(rescueQuiet)) {
			t.Errorf("job %d rescued at %s, before the server (up since %s) had been up for the rescuer's quiet period %v",
				r.Job, r.At.Format("15:04:05.000"), pmStart.Format("15:04:05.000"), rescueQuiet)
		}
	}
	if len(rescues) != len(sc.held) {
		t.Errorf("rescues of the killed worker's jobs %v: %v; want one each", sc.held, rescues)
	}
	if latest > bound+time.Second {
		t.Errorf("the killed worker's jobs were rescued up to %v after the server was back; want within %v (quiet period %v + 3 RescueIntervals) and a second",
			latest, bound, rescueQuiet)
	}
	for _, id := range sc.held {
		if r := e.Row(t, id); !r.Processed || r.Attempts != 2 {
			t.Errorf("the killed worker's job %d: %+v; want processed on attempt 2", id, r)
		}
	}
	return latest
}

// checkKilledAttemptsStillCounted checks that the killed attempts never ended: each stays counted
// running in the ledger's per-blog counts, and its retry started in the slot it held. Checked, then
// left out of the common checks.
func (sc *victimBesideSurvivor) checkKilledAttemptsStillCounted(t *testing.T) {
	t.Helper()
	ctx, e, blogs := context.Background(), sc.e, sc.blogs
	rows, err := e.LedgerDB.Query(ctx, `SELECT blog_id, running, max_seen, cardinality(slots), slot_clashes FROM mp_conc
		WHERE blog_id = ANY ($1) ORDER BY blog_id`, blogs)
	if err != nil {
		t.Fatal(err)
	}
	type conc struct{ Blog, Running, MaxSeen, Slots, Clashes int64 }
	concs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[conc])
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range concs {
		if want := (conc{Blog: blogs[i], Running: 1, MaxSeen: 2, Slots: 0, Clashes: 1}); c != want {
			t.Errorf("blocked blog's handler counts %+v; want %+v: the killed attempt counted, its retry alone beside it", c, want)
		}
	}
	if len(concs) != len(blogs) {
		t.Errorf("handler counts of the blocked blogs: %+v; want one for each of %v", concs, blogs)
	}
	if _, err := e.LedgerDB.Exec(ctx, `DELETE FROM mp_conc WHERE blog_id = ANY ($1)`, blogs); err != nil {
		t.Fatal(err)
	}
}

// checkOnlyVictimsJobsRanTwice checks that the victim's jobs, and they alone, had their handler
// called twice (from the ledger brought home: run it after End).
func (sc *victimBesideSurvivor) checkOnlyVictimsJobsRanTwice(t *testing.T) {
	t.Helper()
	twice := calledTwice(t, sc.e)
	var wantTwice []string
	for _, id := range sc.held {
		wantTwice = append(wantTwice, fmt.Sprintf("%s %d: 2 calls", faultkit.KeyedKind, id))
	}
	if !slices.EqualFunc(twice, wantTwice, strings.HasPrefix) {
		t.Errorf("jobs whose handlers were called more than once (kind, job, calls, tokens): %v; want the killed worker's alone, twice each: %v", twice, wantTwice)
	}
}

// calledTwice lists the jobs whose handler was called more than once, from the ledger brought
// home (run it after End).
func calledTwice(t *testing.T, e *faultkit.PostgresWorld) []string {
	t.Helper()
	rows, err := e.DB.Query(context.Background(), `SELECT format('%s %s: %s calls, tokens %s', coalesce(kind, $1), job_id, count(*), array_agg(token ORDER BY n))
		FROM mp_ledger GROUP BY kind, job_id HAVING count(*) > 1 ORDER BY kind, job_id`, faultkit.KeyedKind)
	if err != nil {
		t.Fatal(err)
	}
	twice, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return twice
}

// recordedAfterLease counts the jobs processed after the outage by an attempt whose handler had
// returned ok before the server was back, more than a lease after the claim: the outcomes that
// waited through the outage while their lease ran out (the handlers take milliseconds, so no
// heartbeat renewed them). Run it after End.
func recordedAfterLease(t *testing.T, e *faultkit.PostgresWorld, down, up time.Time) int {
	t.Helper()
	var n int
	if err := e.DB.QueryRow(context.Background(), `SELECT count(*) FROM fault_audit a
		JOIN mp_ledger l ON l.job_id = a.job_id AND l.token = a.old_token AND l.kind IS NOT DISTINCT FROM nullif(a.kind, $1)
		WHERE a.old_state = 'running' AND a.new_state = 'processed' AND a.at > $2 AND l.outcome = 'ok' AND l.ended_at < $3
		AND a.at > l.started_at + make_interval(secs => $4)`,
		faultkit.KeyedKind, down, up, outageLeaseTTL.Seconds()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
