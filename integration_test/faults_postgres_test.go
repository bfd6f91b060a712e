package integration_test

// The PostgreSQL fault scenarios of docs/reliability.md: 9 (the server restarted, fast and immediate), 10 (a
// storm of terminated backends) and 12 (a long transaction pinning MVCC). Each runs its own
// PostgreSQL cluster (internal/pgproc), never the shared server, with two worker processes working a
// plain kind (the throughput) and the keyed kind (Redis locks, per-key limit 1), under a steady
// offered load that the machine sustains with room to spare (see pgfPlainRate).

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
	pgfPlainRate = 700
	pgfKeyedRate = 100
)

// pgfWarmUp is left to the workers before a baseline is measured: the first second's jobs start
// together with the workers' first claims.
const pgfWarmUp = 4 * time.Second

// TestFault09PostgresRestart restarts the private PostgreSQL cluster twice under load, first in fast
// mode (sessions ended, checkpoint), then in immediate mode (every process ended at once: crash
// recovery). The workers must ride through both: no process exits, their pools and LISTEN
// connections recover, throughput is back at >= 90% of its baseline (capped at the offered rate:
// see pgfLoad.reference) within 10 s of the server accepting connections again, nothing is lost, no row finishes twice and no token goes backwards
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
	e := newPGFEnv(t, pgfOptions{workers: 2, concurrency: 16, ledgerElsewhere: true})
	load := e.startLoad(pgfPlainRate, pgfKeyedRate)
	time.Sleep(pgfWarmUp)
	b0, _, base := e.window(t, 6*time.Second)
	ref := load.reference(base)

	type restart struct {
		mode         pgproc.Mode
		down, up     time.Time
		plain, keyed time.Duration // back at 90% of the baseline after up
		back         bool          // both within 10 s
		during       pgfRates      // from down to up
		stall        time.Duration // the longest time without a plain job done, around the restart
	}
	var restarts []*restart
	for _, mode := range []pgproc.Mode{pgproc.Fast, pgproc.Immediate} {
		r := &restart{mode: mode, down: time.Now()}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := e.pg.Restart(ctx, mode)
		cancel()
		r.up = time.Now()
		if err != nil {
			t.Fatalf("restart %s: %v", mode, err)
		}
		e.checkAlive(t, "right after the "+string(mode)+" restart")
		time.Sleep(time.Until(r.up.Add(10*time.Second + 500*time.Millisecond)))
		e.checkAlive(t, "10 s after the "+string(mode)+" restart")
		r.plain, r.keyed, r.back = e.recovery(t, r.up, ref, 0.9)
		r.during = e.rates(t, r.down, r.up)
		r.stall = e.longestStall(t, pgfPlainKind, r.down.Add(-time.Second), r.up.Add(5*time.Second))
		t.Logf("%s restart: down at %s, accepting connections at %s", mode, r.down.Format("15:04:05.000"), r.up.Format("15:04:05.000"))
		restarts = append(restarts, r)
	}
	fast, imm := restarts[0], restarts[1]
	after := e.rates(t, imm.up.Add(5*time.Second), imm.up.Add(10*time.Second))
	v := e.end(t, load, b0)

	for _, r := range restarts {
		if !r.back {
			t.Errorf("%s restart: throughput not back at 90%% of its baseline within 10 s of the server accepting connections (plain after %v, keyed after %v)",
				r.mode, r.plain, r.keyed)
		}
	}
	faultkit.ReportFigures(t, scenario, append([]any{
		"baseline plain/s", base.plain, "baseline keyed/s", base.keyed,
		"fast: down", fast.up.Sub(fast.down), "fast: during plain/s", fast.during.plain, "fast: longest stall", fast.stall,
		"fast: back to 90% plain", fast.plain, "fast: back to 90% keyed", fast.keyed,
		"immediate: down", imm.up.Sub(imm.down), "immediate: during plain/s", imm.during.plain, "immediate: longest stall", imm.stall,
		"immediate: back to 90% plain", imm.plain, "immediate: back to 90% keyed", imm.keyed,
		"after plain/s", after.plain, "after keyed/s", after.keyed,
	}, v.figures()...)...)
}

// TestFault10BackendKillStorm terminates every backend of the workers' dispatchers (their pools and
// LISTEN connections, named by application_name; the ledger's and the test's own connections are
// spared) twice a second for 30 s under load: 60 s halved to fit the suite's
// time, which still makes 60 storms. Completion during the storm must stay at >= 95%: completions
// per second while it blows against completions per second before it, capped at the offered rate
// (pgfLoad.reference). The load is offered at a steady rate, so a backlog the storm leaves shows as
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
	e := newPGFEnv(t, pgfOptions{workers: 2, concurrency: 16})
	load := e.startLoad(pgfPlainRate, pgfKeyedRate)
	time.Sleep(pgfWarmUp)
	b0, _, base := e.window(t, 6*time.Second)
	ref := load.reference(base)

	s0 := time.Now()
	var rounds, killed int
	tick := time.NewTicker(every)
	for ; time.Since(s0) < storm; <-tick.C {
		var n int
		if err := e.DB.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
			FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()`, pgfWorkerApp).Scan(&n); err != nil {
			t.Fatalf("terminating the workers' backends: %v", err)
		}
		rounds, killed = rounds+1, killed+n
		if rounds%10 == 0 {
			e.checkAlive(t, "during the storm")
		}
	}
	tick.Stop()
	s1 := time.Now()
	e.checkAlive(t, "after the storm")
	t.Logf("storm from %s to %s", s0.Format("15:04:05.000"), s1.Format("15:04:05.000"))
	time.Sleep(time.Until(s1.Add(10*time.Second + 500*time.Millisecond)))
	during := e.rates(t, s0, s1)
	stallPlain, stallKeyed := e.longestStall(t, pgfPlainKind, s0, s1), e.longestStall(t, "", s0, s1)
	latBase, latStorm := e.latencyP99(t, b0, s0), e.latencyP99(t, s0, s1)
	backPlain, backKeyed, _ := e.recovery(t, s1, ref, 0.9)
	after := e.rates(t, s1.Add(4*time.Second+500*time.Millisecond), s1.Add(10*time.Second+500*time.Millisecond))
	v := e.end(t, load, b0)

	completion := pgfRates{plain: during.plain / ref.plain, keyed: during.keyed / ref.keyed}
	if completion.plain < 0.95 || completion.keyed < 0.95 {
		t.Errorf("completion during the storm: plain %.1f%%, keyed %.1f%% of the baseline; want >= 95%%", 100*completion.plain, 100*completion.keyed)
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
		"baseline plain/s", base.plain, "baseline keyed/s", base.keyed,
		"during plain/s", during.plain, "during keyed/s", during.keyed,
		"completion during plain %", 100 * completion.plain, "completion during keyed %", 100 * completion.keyed,
		"longest stall plain", stallPlain, "longest stall keyed", stallKeyed,
		"p99 latency before", latBase, "p99 latency during", latStorm,
		"back to 90% plain", backPlain, "back to 90% keyed", backKeyed,
		"after plain/s", after.plain, "after keyed/s", after.keyed,
	}, v.figures()...)...)
}

// TestFault12LongTransactionPinsMVCC holds a transaction open with an xid (BEGIN; SELECT
// txid_current()) for 40 s under 800 jobs/s: the scenario's rate, and 4 minutes scaled to fit the
// suite's time. While it is held, no vacuum may remove what a job leaves dead (each job leaves at
// least two row versions and their index entries), and the claims of the keyed kind, which walk the
// ready index, meet every dead entry. Throughput while pinned must stay at >= 95% of the clean
// throughput before (capped at the offered rate: pgfLoad.reference); the peak of dead tuples, the jobs' latency and how long autovacuum takes to
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
	e := newPGFEnv(t, pgfOptions{workers: 2, concurrency: 16, settings: map[string]string{"autovacuum_naptime": "5s"}})
	load := e.startLoad(pgfPlainRate, pgfKeyedRate)
	time.Sleep(pgfWarmUp)
	c0, c1, clean := e.window(t, 8*time.Second)
	ref := load.reference(clean)

	pin, err := pgx.Connect(ctx, e.pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pin.Close(ctx)
	tx, err := pin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var xid int64
	var pinPid int
	if err := tx.QueryRow(ctx, `SELECT txid_current(), pg_backend_pid()`).Scan(&xid, &pinPid); err != nil {
		t.Fatal(err)
	}
	p0 := time.Now()
	var peak pgfDead
	var xidAge int
	for time.Since(p0) < pinned {
		time.Sleep(time.Second)
		peak = peak.max(e.deadTuples(t))
		if err := e.DB.QueryRow(ctx, `SELECT coalesce(max(age(backend_xid)), 0) FROM pg_stat_activity WHERE pid = $1`, pinPid).Scan(&xidAge); err != nil {
			t.Fatal(err)
		}
	}
	e.checkAlive(t, "while pinned")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	p1 := time.Now()
	t.Logf("pinned (xid %d) from %s to %s", xid, p0.Format("15:04:05.000"), p1.Format("15:04:05.000"))

	// After: until autovacuum has taken the dead tuples below a tenth of their peak, at most 20 s.
	var cleaned time.Duration
	for cleaned = 0; cleaned < 20*time.Second; cleaned = time.Since(p1) {
		if d := e.deadTuples(t); d.plain < peak.plain/10 && d.keyed < peak.keyed/10 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	time.Sleep(time.Until(p1.Add(8 * time.Second)))
	a1 := time.Now()
	during, after := e.rates(t, p0, p1), e.rates(t, p1, a1)
	donePinned := int((during.plain + during.keyed) * p1.Sub(p0).Seconds())
	latClean, latPinned, latAfter := e.latencyP99(t, c0, c1), e.latencyP99(t, p0, p1), e.latencyP99(t, p1, a1)
	backPlain, backKeyed, _ := e.recovery(t, p1, ref, 0.95)
	v := e.end(t, load, c0)

	ratio := pgfRates{plain: during.plain / ref.plain, keyed: during.keyed / ref.keyed}
	if ratio.plain < 0.95 || ratio.keyed < 0.95 {
		t.Errorf("throughput while pinned: plain %.1f%%, keyed %.1f%% of clean; want >= 95%%", 100*ratio.plain, 100*ratio.keyed)
	}
	// The pin held: what the jobs left dead stayed, at least one row version per job.
	if peak.plain+peak.keyed < donePinned {
		t.Errorf("peak dead tuples %d (plain) + %d (keyed) < %d jobs done while pinned: the transaction did not hold the horizon",
			peak.plain, peak.keyed, donePinned)
	}
	if cleaned >= 20*time.Second {
		t.Errorf("20 s after the transaction ended, autovacuum had not cleaned up (peak %+v)", peak)
	}
	faultkit.ReportFigures(t, scenario, append([]any{
		"pinned", p1.Sub(p0), "xids consumed while pinned", xidAge,
		"clean plain/s", clean.plain, "clean keyed/s", clean.keyed,
		"pinned plain/s", during.plain, "pinned keyed/s", during.keyed,
		"pinned/clean plain %", 100 * ratio.plain, "pinned/clean keyed %", 100 * ratio.keyed,
		"after plain/s", after.plain, "after keyed/s", after.keyed,
		"back to 95% plain", backPlain, "back to 95% keyed", backKeyed,
		"p99 latency clean", latClean, "p99 latency pinned", latPinned, "p99 latency after", latAfter,
		"peak dead tuples plain", peak.plain, "peak dead tuples keyed", peak.keyed,
		"dead tuples below 10% of peak after", cleaned,
	}, v.figures()...)...)
}
