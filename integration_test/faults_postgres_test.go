package integration_test

// The PostgreSQL fault scenarios of docs/reliability.md: 9 (the server restarted, fast and immediate), 10 (a
// storm of terminated backends) and 12 (a long transaction pinning MVCC). Each runs its own
// PostgreSQL cluster (internal/pgproc), never the shared server, with two worker processes working a
// plain kind (the throughput) and the keyed kind (Redis locks, per-key limit 1), under a steady
// offered load that the machine sustains with room to spare (see offeredPlainRate).

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
	"github.com/jobpipe/jobpipe/internal/pgproc"
)

// The offered load, jobs per second: 800 in all, scenario 12's rate. Two workers of 16 sustain
// well over that on a 2-core machine when nothing else runs, so the backlog a fault leaves is
// caught up, and throughput ratios measure the fault rather than the machine's limit.
const (
	offeredPlainRate = 700
	offeredKeyedRate = 100
)

// warmUpBeforeBaseline is left to the workers before a baseline is measured: the first second's jobs start
// together with the workers' first claims.
const warmUpBeforeBaseline = 4 * time.Second

// TestFault09PostgresRestart restarts the private PostgreSQL cluster twice under load, first in fast
// mode (sessions ended, checkpoint), then in immediate mode (every process ended at once: crash
// recovery). The workers must ride through both: no process exits, their pools and LISTEN
// connections recover, throughput is back at >= 90% of its baseline (capped at the offered rate:
// see OfferedLoad.Reference) within 10 s of the server accepting connections again, nothing is lost, no row finishes twice and no token goes backwards
// (CheckAudit), and every re-run is explained by the audit.
//
// The ledger, the test's witness, lives on a second private cluster that is not restarted. Kept in
// the restarted database, a ledger write lost with the server (the handler then returns an error
// and its job is retried: at least once, as it should) leaves an attempt without its ledger row,
// which CheckAudit reports as a finish written by no attempt holding the token, or a handler counted
// running forever: the witness failing, not the library.
func TestFault09PostgresRestart(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	const scenario = "09 PostgreSQL restart"

	// Arranged: two workers under a steady offered load, the ledger on a second cluster; the baseline.
	e := faultkit.NewPostgresWorld(t, faultkit.PostgresOptions{Workers: 2, Concurrency: 16, LedgerElsewhere: true})
	load := e.StartLoad(offeredPlainRate, offeredKeyedRate)
	time.Sleep(warmUpBeforeBaseline)
	b0, _, base := e.MeasureRates(t, 6*time.Second)
	ref := load.Reference(base)

	// Injected: the server restarted in fast mode, then in immediate mode.
	fast := restartServer(t, e, pgproc.Fast, ref)
	imm := restartServer(t, e, pgproc.Immediate, ref)
	after := e.Rates(t, imm.up.Add(5*time.Second), imm.up.Add(10*time.Second))
	v := e.End(t, load, b0)

	// What must hold: back at 90% of the baseline within 10 s of each restart; everything End checks.
	for _, r := range []*restart{fast, imm} {
		if !r.back {
			t.Errorf("%s restart: throughput not back at 90%% of its baseline within 10 s of the server accepting connections (plain after %v, keyed after %v)",
				r.mode, r.plain, r.keyed)
		}
	}
	faultkit.ReportFigures(t, scenario, append([]any{
		"baseline plain/s", base.Plain, "baseline keyed/s", base.Keyed,
		"fast: down", fast.up.Sub(fast.down), "fast: during plain/s", fast.during.Plain, "fast: longest stall", fast.stall,
		"fast: back to 90% plain", fast.plain, "fast: back to 90% keyed", fast.keyed,
		"immediate: down", imm.up.Sub(imm.down), "immediate: during plain/s", imm.during.Plain, "immediate: longest stall", imm.stall,
		"immediate: back to 90% plain", imm.plain, "immediate: back to 90% keyed", imm.keyed,
		"after plain/s", after.Plain, "after keyed/s", after.Keyed,
	}, v.Figures()...)...)
}

// restart is what one restart of scenario 9 showed.
type restart struct {
	mode         pgproc.Mode
	down, up     time.Time
	plain, keyed time.Duration      // back at 90% of the baseline after up
	back         bool               // both within 10 s
	during       faultkit.KindRates // from down to up
	stall        time.Duration      // the longest time without a plain job done, around the restart
}

// restartServer restarts the private cluster in mode, checks that no worker exited then and 10 s
// later, and measures how the throughput came back to 90% of ref.
func restartServer(t *testing.T, e *faultkit.PostgresWorld, mode pgproc.Mode, ref faultkit.KindRates) *restart {
	t.Helper()
	r := &restart{mode: mode, down: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := e.PG.Restart(ctx, mode)
	cancel()
	r.up = time.Now()
	if err != nil {
		t.Fatalf("restart %s: %v", mode, err)
	}
	e.CheckAlive(t, "right after the "+string(mode)+" restart")
	time.Sleep(time.Until(r.up.Add(10*time.Second + 500*time.Millisecond)))
	e.CheckAlive(t, "10 s after the "+string(mode)+" restart")
	r.plain, r.keyed, r.back = e.Recovery(t, r.up, ref, 0.9)
	r.during = e.Rates(t, r.down, r.up)
	r.stall = e.LongestStall(t, faultkit.PostgresPlainKind, r.down.Add(-time.Second), r.up.Add(5*time.Second))
	t.Logf("%s restart: down at %s, accepting connections at %s", mode, r.down.Format("15:04:05.000"), r.up.Format("15:04:05.000"))
	return r
}

// TestFault10BackendKillStorm terminates every backend of the workers' dispatchers (their pools and
// LISTEN connections, named by application_name; the ledger's and the test's own connections are
// spared) twice a second for 30 s under load: 60 s halved to fit the suite's
// time, which still makes 60 storms. Completion during the storm must stay at >= 95%: completions
// per second while it blows against completions per second before it, capped at the offered rate
// (OfferedLoad.Reference). The load is offered at a steady rate, so a backlog the storm leaves shows as
// a shortfall. Since a catch-up can make good a stall in that average, the workers must also never
// stand still for a second during the storm (the longest time without a job done). Afterwards
// no job may stay running: every lease is released or rescued and everything finishes.
func TestFault10BackendKillStorm(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	const (
		scenario = "10 backend kill storm"
		storm    = 30 * time.Second
		every    = 500 * time.Millisecond
	)

	// Arranged: two workers under a steady offered load; the baseline.
	e := faultkit.NewPostgresWorld(t, faultkit.PostgresOptions{Workers: 2, Concurrency: 16})
	load := e.StartLoad(offeredPlainRate, offeredKeyedRate)
	time.Sleep(warmUpBeforeBaseline)
	b0, _, base := e.MeasureRates(t, 6*time.Second)
	ref := load.Reference(base)

	// Injected: the workers' backends terminated every half second for 30 s.
	s0, s1, rounds, killed := terminateBackendsInStorm(t, e, storm, every)
	time.Sleep(time.Until(s1.Add(10*time.Second + 500*time.Millisecond)))
	during := e.Rates(t, s0, s1)
	stallPlain, stallKeyed := e.LongestStall(t, faultkit.PostgresPlainKind, s0, s1), e.LongestStall(t, "", s0, s1)
	latBase, latStorm := e.LatencyP99(t, b0, s0), e.LatencyP99(t, s0, s1)
	backPlain, backKeyed, _ := e.Recovery(t, s1, ref, 0.9)
	after := e.Rates(t, s1.Add(4*time.Second+500*time.Millisecond), s1.Add(10*time.Second+500*time.Millisecond))
	v := e.End(t, load, b0)

	// What must hold: 95% of the baseline completed during the storm, never a second without a job
	// done, every round hitting the workers; everything End checks.
	completion := faultkit.KindRates{Plain: during.Plain / ref.Plain, Keyed: during.Keyed / ref.Keyed}
	if completion.Plain < 0.95 || completion.Keyed < 0.95 {
		t.Errorf("completion during the storm: plain %.1f%%, keyed %.1f%% of the baseline; want >= 95%%", 100*completion.Plain, 100*completion.Keyed)
	}
	// The average hides stalls that a catch-up makes good: the workers must not stand still for
	// half a default PollInterval (2 s), which a failed claim waiting for the next poll, or a LISTEN
	// connection long in coming back, would make them do.
	if stallPlain >= time.Second || stallKeyed >= time.Second {
		t.Errorf("during the storm no plain job ended for %v, no keyed job for %v; want under 1 s", stallPlain, stallKeyed)
	}
	if killed < rounds {
		t.Errorf("%d backends terminated in %d rounds: the storm missed the workers", killed, rounds)
	}
	faultkit.ReportFigures(t, scenario, append([]any{
		"storm", s1.Sub(s0), "rounds", rounds, "backends terminated", killed,
		"baseline plain/s", base.Plain, "baseline keyed/s", base.Keyed,
		"during plain/s", during.Plain, "during keyed/s", during.Keyed,
		"completion during plain %", 100 * completion.Plain, "completion during keyed %", 100 * completion.Keyed,
		"longest stall plain", stallPlain, "longest stall keyed", stallKeyed,
		"p99 latency before", latBase, "p99 latency during", latStorm,
		"back to 90% plain", backPlain, "back to 90% keyed", backKeyed,
		"after plain/s", after.Plain, "after keyed/s", after.Keyed,
	}, v.Figures()...)...)
}

// terminateBackendsInStorm terminates every backend of the workers' dispatchers every period until
// storm has passed, checking now and then that no worker exited. It returns when the storm began and
// ended, its rounds, and how many backends it terminated.
func terminateBackendsInStorm(t *testing.T, e *faultkit.PostgresWorld, storm, every time.Duration) (s0, s1 time.Time, rounds, killed int) {
	t.Helper()
	s0 = time.Now()
	tick := time.NewTicker(every)
	for ; time.Since(s0) < storm; <-tick.C {
		var n int
		if err := e.DB.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
			FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()`, faultkit.WorkerApp).Scan(&n); err != nil {
			t.Fatalf("terminating the workers' backends: %v", err)
		}
		rounds, killed = rounds+1, killed+n
		if rounds%10 == 0 {
			e.CheckAlive(t, "during the storm")
		}
	}
	tick.Stop()
	s1 = time.Now()
	e.CheckAlive(t, "after the storm")
	t.Logf("storm from %s to %s", s0.Format("15:04:05.000"), s1.Format("15:04:05.000"))
	return s0, s1, rounds, killed
}

// TestFault12LongTransactionPinsMVCC holds a transaction open with an xid (BEGIN; SELECT
// txid_current()) for 40 s under 800 jobs/s: the scenario's rate, and 4 minutes scaled to fit the
// suite's time. While it is held, no vacuum may remove what a job leaves dead (each job leaves at
// least two row versions and their index entries), and the claims of the keyed kind, which walk the
// ready index, meet every dead entry. Throughput while pinned must stay at >= 95% of the clean
// throughput before (capped at the offered rate: OfferedLoad.Reference); the peak of dead tuples, the jobs' latency and how long autovacuum takes to
// clean up after the transaction ends are reported.
//
// Autovacuum is on, as in production, with a 5 s naptime instead of 1 min so that it visits the
// tables several times while they are pinned (and can remove nothing) and promptly after.
func TestFault12LongTransactionPinsMVCC(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	const (
		scenario = "12 long transaction pinning MVCC"
		pinned   = 40 * time.Second
	)
	ctx := context.Background()

	// Arranged: two workers under a steady offered load, autovacuum visiting every 5 s; the clean
	// throughput.
	e := faultkit.NewPostgresWorld(t, faultkit.PostgresOptions{Workers: 2, Concurrency: 16, Settings: map[string]string{"autovacuum_naptime": "5s"}})
	load := e.StartLoad(offeredPlainRate, offeredKeyedRate)
	time.Sleep(warmUpBeforeBaseline)
	c0, c1, clean := e.MeasureRates(t, 8*time.Second)
	ref := load.Reference(clean)

	// Injected: a transaction holding an xid for 40 s; then autovacuum left to clean up.
	pin, err := pgx.Connect(ctx, e.PG.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pin.Close(ctx)
	p := pinMVCC(t, e, pin, pinned)
	cleaned := waitDeadTuplesCleaned(t, e, p)
	time.Sleep(time.Until(p.p1.Add(8 * time.Second)))
	a1 := time.Now()
	p0, p1, peak := p.p0, p.p1, p.peak
	during, after := e.Rates(t, p0, p1), e.Rates(t, p1, a1)
	donePinned := int((during.Plain + during.Keyed) * p1.Sub(p0).Seconds())
	latClean, latPinned, latAfter := e.LatencyP99(t, c0, c1), e.LatencyP99(t, p0, p1), e.LatencyP99(t, p1, a1)
	backPlain, backKeyed, _ := e.Recovery(t, p1, ref, 0.95)
	v := e.End(t, load, c0)

	// What must hold: 95% of the clean throughput while pinned; the pin held the horizon, and
	// autovacuum cleaned up within 20 s of its end; everything End checks.
	ratio := faultkit.KindRates{Plain: during.Plain / ref.Plain, Keyed: during.Keyed / ref.Keyed}
	if ratio.Plain < 0.95 || ratio.Keyed < 0.95 {
		t.Errorf("throughput while pinned: plain %.1f%%, keyed %.1f%% of clean; want >= 95%%", 100*ratio.Plain, 100*ratio.Keyed)
	}
	// The pin held: what the jobs left dead stayed, at least one row version per job.
	if peak.Plain+peak.Keyed < donePinned {
		t.Errorf("peak dead tuples %d (plain) + %d (keyed) < %d jobs done while pinned: the transaction did not hold the horizon",
			peak.Plain, peak.Keyed, donePinned)
	}
	if cleaned >= 20*time.Second {
		t.Errorf("20 s after the transaction ended, autovacuum had not cleaned up (peak {plain:%d keyed:%d})", peak.Plain, peak.Keyed)
	}
	faultkit.ReportFigures(t, scenario, append([]any{
		"pinned", p1.Sub(p0), "xids consumed while pinned", p.xidAge,
		"clean plain/s", clean.Plain, "clean keyed/s", clean.Keyed,
		"pinned plain/s", during.Plain, "pinned keyed/s", during.Keyed,
		"pinned/clean plain %", 100 * ratio.Plain, "pinned/clean keyed %", 100 * ratio.Keyed,
		"after plain/s", after.Plain, "after keyed/s", after.Keyed,
		"back to 95% plain", backPlain, "back to 95% keyed", backKeyed,
		"p99 latency clean", latClean, "p99 latency pinned", latPinned, "p99 latency after", latAfter,
		"peak dead tuples plain", peak.Plain, "peak dead tuples keyed", peak.Keyed,
		"dead tuples below 10% of peak after", cleaned,
	}, v.Figures()...)...)
}

// mvccPin is what a transaction pinning MVCC held.
type mvccPin struct {
	p0, p1 time.Time // when it began and committed
	peak   faultkit.DeadTuples
	xidAge int // how many xids were consumed since its own
}

// pinMVCC holds a transaction with an xid open on conn (BEGIN; SELECT txid_current()) for pinned,
// reading the kinds' dead tuples and the xids consumed every second, and commits it.
func pinMVCC(t *testing.T, e *faultkit.PostgresWorld, conn *pgx.Conn, pinned time.Duration) mvccPin {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var xid int64
	var pinPid int
	if err := tx.QueryRow(ctx, `SELECT txid_current(), pg_backend_pid()`).Scan(&xid, &pinPid); err != nil {
		t.Fatal(err)
	}
	p := mvccPin{p0: time.Now()}
	for time.Since(p.p0) < pinned {
		time.Sleep(time.Second)
		p.peak = p.peak.Max(e.DeadTuples(t))
		if err := e.DB.QueryRow(ctx, `SELECT coalesce(max(age(backend_xid)), 0) FROM pg_stat_activity WHERE pid = $1`, pinPid).Scan(&p.xidAge); err != nil {
			t.Fatal(err)
		}
	}
	e.CheckAlive(t, "while pinned")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	p.p1 = time.Now()
	t.Logf("pinned (xid %d) from %s to %s", xid, p.p0.Format("15:04:05.000"), p.p1.Format("15:04:05.000"))
	return p
}

// waitDeadTuplesCleaned waits until autovacuum has taken the dead tuples below a tenth of their
// peak, at most 20 s, and returns how long after the commit that was.
func waitDeadTuplesCleaned(t *testing.T, e *faultkit.PostgresWorld, p mvccPin) time.Duration {
	t.Helper()
	var cleaned time.Duration
	for cleaned = 0; cleaned < 20*time.Second; cleaned = time.Since(p.p1) {
		if d := e.DeadTuples(t); d.Plain < p.peak.Plain/10 && d.Keyed < p.peak.Keyed/10 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	return cleaned
}
