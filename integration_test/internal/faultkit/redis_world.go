package faultkit

// The world of the Redis and network scenarios: Redis nodes of their own, the kinds (keyed, and
// plain and probe when asked for), every kind audited, workers of short jobs, and a run in phases
// (before a fault, during it, after it heals) measured on the database's clock.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
)

const (
	// RedisLeaseTTL is the workers' lease in scenarios 2 to 4: heartbeats every 2 s, and execlock's call
	// timeout at its default of a second (a quarter of the TTL, at most 1 s).
	RedisLeaseTTL = 6 * time.Second
	// LockCallTimeout is execlock's bound on each lock call for RedisLeaseTTL (Config.CallTimeout).
	LockCallTimeout = time.Second
	// warmUp lets the workers and the feed settle before the first window is measured.
	warmUp = 2 * time.Second
	// KeepUp is the share of the offered load a healthy system delivers in every window of scenarios
	// 2 to 5. The feed offers a fraction of what two workers sustain on a loaded 2-core machine, so a
	// system that keeps working keeps up with it; the fifth left over covers the windows' edges
	// cutting through the feed's batches (one every 50 ms) and the machine's noise. A fault that made lock calls wait for a dead or stalled node (go-redis's default
	// 5 s reads, or no fail-fast) would cut throughput far below it.
	KeepUp = 0.8
)

// ShortJobs are the workers' settings in scenarios 2 to 5 and the network scenarios: short jobs (1 to
// 3 ms) and RedisLeaseTTL.
func ShortJobs(s *WorkerSettings) {
	s.SleepMin, s.SleepMax = time.Millisecond, 3*time.Millisecond
	s.LeaseTTL = RedisLeaseTTL
	s.PollInterval = 500 * time.Millisecond
	s.Concurrency = 20
}

// RedisWorld is a Redis fault scenario's environment: the multi-process test's (World) on Redis nodes of
// its own, the plain and probe kinds when asked for, every kind audited, and the claim-order check.
type RedisWorld struct {
	*World
	Redis []*testenv.RedisNode
	Plain *jobinfo.Kind[PlainJob] // nil unless asked for
	Probe *jobinfo.Kind[ProbeJob] // nil unless asked for
}

// RedisWorldSpec says what a RedisWorld is made of.
type RedisWorldSpec struct {
	Nodes  int  // Redis nodes of its own
	Plain  bool // the plain kind (RedisPlainKind) besides the keyed one
	Probes bool // the probe kind (ProbeJob), whose jobs time their own heartbeats
}

// NewRedisWorld starts spec.Nodes Redis nodes for t and gives it a schema with the keyed kind, the
// plain kind and the probe kind (when asked for), each audited (InstallAudit).
func NewRedisWorld(t *testing.T, spec RedisWorldSpec) *RedisWorld {
	t.Helper()
	nodes := testenv.StartRedisNodes(t, spec.Nodes)
	addrs, clients := NodeAddrs(nodes)
	e := &RedisWorld{World: NewWorld(t, DefaultRetryDelay, addrs, clients, "jpfr:"), Redis: nodes}
	e.InstallOrderCheck(t)
	InstallAudit(t, e.DB, e.Schema.Name, KeyedKind)
	if spec.Plain {
		e.Plain = e.AddPlainKind(t, RedisPlainKind, DefaultRetryDelay)
		InstallAudit(t, e.DB, e.Schema.Name, RedisPlainKind)
	}
	if spec.Probes {
		kind, err := defineProbeKind()
		if err != nil {
			t.Fatal(err)
		}
		ddl, err := kind.TableSpec().CreateSQL()
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range []string{ddl, probeDDL} {
			if _, err := e.DB.Exec(context.Background(), stmt); err != nil {
				t.Fatal(err)
			}
		}
		e.Probe = kind
		InstallAudit(t, e.DB, e.Schema.Name, ProbeKind)
	}
	return e
}

// WorkerSettings returns the settings of a worker named node that works every kind of e.
func (e *RedisWorld) WorkerSettings(node string) WorkerSettings {
	s := e.World.WorkerSettings(node)
	if e.Plain != nil {
		s.PlainKind = RedisPlainKind
	}
	if e.Probe != nil {
		s.Probes = true
	}
	return s
}

// StartWorkers starts a worker named after each of names, with the settings set gives it, and waits
// until each is working.
func (e *RedisWorld) StartWorkers(t *testing.T, set func(s *WorkerSettings), names ...string) []*Worker {
	t.Helper()
	var workers []*Worker
	for _, name := range names {
		s := e.WorkerSettings(name)
		set(&s)
		workers = append(workers, StartWorker(t, s))
	}
	WaitReady(t, 60*time.Second, workers...)
	return workers
}

// startProbes enqueues n probe jobs (keys 1 to n) and returns their ids.
func (e *RedisWorld) startProbes(t *testing.T, n int) map[int64]KeyedJob {
	t.Helper()
	jobs := make([]ProbeJob, n)
	for i := range jobs {
		jobs[i] = ProbeJob{Probe: int64(i + 1)}
	}
	res, err := dispatcher.EnqueueMany(context.Background(), e.DB, e.Probe, jobs)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int64]KeyedJob{}
	for i, r := range res {
		if r.Err != nil || r.Duplicate {
			t.Fatalf("enqueue probe %+v: %+v", jobs[i], r)
		}
		ids[r.ID] = KeyedJob{BlogID: ProbeBlogBase + jobs[i].Probe, Seq: jobs[i].Seq}
	}
	return ids
}

// stopProbes ends every probe job (at its next tick).
func (e *RedisWorld) stopProbes(t *testing.T) {
	t.Helper()
	if _, err := e.DB.Exec(context.Background(), `INSERT INTO fr_probe_stop VALUES (true)`); err != nil {
		t.Fatal(err)
	}
}

// Heartbeats summarises the probe jobs' heartbeats sent in [from, to).
func (e *RedisWorld) Heartbeats(t *testing.T, from, to time.Time) Latency {
	t.Helper()
	rows, err := e.DB.Query(context.Background(), `SELECT took_us, err IS NOT NULL FROM fr_heartbeats
		WHERE sent_at >= $1 AND sent_at < $2`, from, to)
	if err != nil {
		t.Fatal(err)
	}
	var took []time.Duration
	failed := 0
	var us int64
	var bad bool
	if _, err := pgx.ForEachRow(rows, []any{&us, &bad}, func() error {
		took = append(took, time.Duration(us)*time.Microsecond)
		if bad {
			failed++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return summarise(took, failed)
}

// StartLag summarises how long the keyed kind's jobs that started in [from, to), on their first
// attempt, waited from their enqueue to their start: the dispatch latency, which slow lock calls
// lengthen before they cut throughput.
func (e *RedisWorld) StartLag(t *testing.T, from, to time.Time) Latency {
	t.Helper()
	rows, err := e.DB.Query(context.Background(), `SELECT (extract(epoch FROM l.started_at - j.created_at) * 1e6)::bigint
		FROM mp_ledger l JOIN `+KeyedKind+` j ON j.id = l.job_id
		WHERE l.kind IS NULL AND l.attempt = 1 AND l.started_at >= $1 AND l.started_at < $2`, from, to)
	if err != nil {
		t.Fatal(err)
	}
	us, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	lags := make([]time.Duration, len(us))
	for i, u := range us {
		lags[i] = time.Duration(u) * time.Microsecond
	}
	return summarise(lags, 0)
}

// RunPhases runs a scenario's phases once its workers and load run: a warm-up (warmUp), phase before
// the fault, then fault and during (the fault's own waiting is fault's), a check that no worker exited
// meanwhile, then heal and phase after it. It returns the phases' windows: Fault is taken just before
// fault, Heal just before heal.
func (e *RedisWorld) RunPhases(t *testing.T, workers []*Worker, phase, during time.Duration, fault, heal func()) Phases {
	t.Helper()
	time.Sleep(warmUp)
	var w Phases
	w.Start = e.Now(t)
	time.Sleep(phase)
	w.Fault = e.Now(t)
	fault()
	time.Sleep(during)
	CheckAliveDuring(t, "the fault", workers...)
	w.Heal = e.Now(t)
	heal()
	time.Sleep(phase)
	w.End = e.Now(t)
	return w
}

// LockOutageBound is how long after a lock outage began (no quorum of nodes answering) a keyed job may
// still start: only on a lock taken before it. Its TryExec returns within a call timeout, the queue
// lock's release takes at most another, and the handler's first ledger write a moment more on a
// loaded machine.
const LockOutageBound = 2*LockCallTimeout + time.Second

// CheckNoKeyedStart fails t for every job of a keyed kind (the keyed kind's and the probe kind's) that
// started in (since+LockOutageBound, until): during a lock outage none may. It returns the last such
// start in [since, until), and the first at or after until (zero when none).
func (e *RedisWorld) CheckNoKeyedStart(t *testing.T, since, until time.Time) (last, firstAfter time.Time) {
	t.Helper()
	for _, m := range e.Ledger(t) {
		if m.BlogID >= RedisPlainBlogBase && m.BlogID < ProbeBlogBase {
			continue // the plain kind's
		}
		switch {
		case !m.StartedAt.Before(since) && m.StartedAt.Before(until):
			last = m.StartedAt
			if m.StartedAt.After(since.Add(LockOutageBound)) {
				t.Errorf("a keyed job started %v into the lock outage: %v", m.StartedAt.Sub(since), m)
			}
		case !m.StartedAt.Before(until) && firstAfter.IsZero():
			firstAfter = m.StartedAt
		}
	}
	return last, firstAfter
}

// Phases are a scenario's phases, on the database's clock (the ledger's): before the fault, during
// it, and after it healed.
type Phases struct {
	Start, Fault, Heal, End time.Time
}

// PhaseRates is a kind's throughput (handler calls ended ok per second) in each phase.
type PhaseRates struct{ Before, During, After float64 }

// Rates measures the throughput of ledgerKind's calls ("" for the keyed kind) in each phase.
func (w Phases) Rates(t *testing.T, db *pgxpool.Pool, ledgerKind string) PhaseRates {
	t.Helper()
	return PhaseRates{LedgerRate(t, db, ledgerKind, w.Start, w.Fault), LedgerRate(t, db, ledgerKind, w.Fault, w.Heal),
		LedgerRate(t, db, ledgerKind, w.Heal, w.End)}
}

// LogSeries logs, for each second of the windows, how many keyed and plain calls ended ok and the
// keyed kind's worst start lag (see StartLag), so that a throughput figure can be traced to the moment
// that made it.
func (e *RedisWorld) LogSeries(t *testing.T, w Phases) {
	t.Helper()
	rows, err := e.DB.Query(context.Background(), `WITH s AS (
		SELECT g AS at FROM generate_series($1::timestamptz, $2::timestamptz, interval '1 second') g)
	SELECT (extract(epoch FROM s.at - $1::timestamptz))::int,
		(SELECT count(*) FROM mp_ledger l WHERE l.kind IS NULL AND l.outcome = 'ok' AND l.ended_at >= s.at AND l.ended_at < s.at + interval '1 second'),
		(SELECT count(*) FROM mp_ledger l WHERE l.kind = $3 AND l.outcome = 'ok' AND l.ended_at >= s.at AND l.ended_at < s.at + interval '1 second'),
		(SELECT coalesce(max(l.started_at - j.created_at), '0') FROM mp_ledger l JOIN `+KeyedKind+` j ON j.id = l.job_id
			WHERE l.kind IS NULL AND l.attempt = 1 AND l.started_at >= s.at AND l.started_at < s.at + interval '1 second')
	FROM s ORDER BY s.at`, w.Start, w.End, RedisPlainKind)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	var sec, keyed, plain int
	var lag time.Duration
	if _, err := pgx.ForEachRow(rows, []any{&sec, &keyed, &plain, &lag}, func() error {
		lines = append(lines, fmt.Sprintf("%ds %d/%d %v", sec, keyed, plain, lag.Round(time.Millisecond)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("per second from the start (fault at %v, heal at %v): keyed/plain ok calls, worst keyed start lag: %s",
		w.Fault.Sub(w.Start).Round(time.Millisecond), w.Heal.Sub(w.Start).Round(time.Millisecond), strings.Join(lines, "; "))
}

// RecoveryAfter is how long after from the throughput of ledgerKind's calls ("" for the keyed kind) first
// reached the rate want over a window of a second: the start of the first such window (windows start
// every 50 ms from from on, and end before to), or -1 if none did.
func RecoveryAfter(t *testing.T, db *pgxpool.Pool, ledgerKind string, from, to time.Time, want float64) time.Duration {
	t.Helper()
	var lk any
	if ledgerKind != "" {
		lk = ledgerKind
	}
	rows, err := db.Query(context.Background(), `SELECT ended_at FROM mp_ledger
		WHERE kind IS NOT DISTINCT FROM $1 AND outcome = 'ok' AND ended_at >= $2 AND ended_at < $3 ORDER BY ended_at`, lk, from, to)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		t.Fatal(err)
	}
	for s := from; !s.Add(time.Second).After(to); s = s.Add(50 * time.Millisecond) {
		i := sort.Search(len(ends), func(i int) bool { return !ends[i].Before(s) })
		j := sort.Search(len(ends), func(j int) bool { return !ends[j].Before(s.Add(time.Second)) })
		if float64(j-i) >= want {
			return s.Sub(from)
		}
	}
	return -1
}
