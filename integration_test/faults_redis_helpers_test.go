package integration_test

// What the Redis fault scenarios (faults_redis_test.go, scenarios 1 to 5) share: their
// environment (Redis nodes of their own, the kinds, every kind audited), a steady feed of jobs, two
// measures of lock calls (a probe in the test process, and probe jobs that time their own heartbeats
// inside the workers), throughput windows, and the checks every scenario ends with.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/execlock"
	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// frEnv is a Redis fault scenario's environment: the multi-process test's (World) on Redis nodes of
// its own, the plain and probe kinds when asked for, every kind audited, and the claim-order check.
type frEnv struct {
	*faultkit.World
	redis []*testenv.RedisNode
	plain *jobinfo.Kind[faultkit.PlainJob] // nil unless asked for
	probe *jobinfo.Kind[faultkit.ProbeJob] // nil unless asked for
}

// newFREnv starts n Redis nodes for t and gives it a schema with the keyed kind, the plain kind (when
// plain) and the probe kind (when probe), each audited (InstallAudit).
func newFREnv(t *testing.T, n int, plain, probe bool) *frEnv {
	t.Helper()
	nodes := testenv.StartRedisNodes(t, n)
	addrs, clients := faultkit.NodeAddrs(nodes)
	e := &frEnv{World: faultkit.NewWorld(t, faultkit.DefaultRetryDelay, addrs, clients, "jpfr:"), redis: nodes}
	e.InstallOrderCheck(t)
	faultkit.InstallAudit(t, e.DB, e.Schema.Name, faultkit.KeyedKind)
	if plain {
		e.plain = e.AddPlainKind(t, faultkit.RedisPlainKind, faultkit.DefaultRetryDelay)
		faultkit.InstallAudit(t, e.DB, e.Schema.Name, faultkit.RedisPlainKind)
	}
	if probe {
		kind, err := faultkit.DefineProbeKind()
		if err != nil {
			t.Fatal(err)
		}
		ddl, err := kind.TableSpec().CreateSQL()
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range []string{ddl, faultkit.ProbeDDL} {
			if _, err := e.DB.Exec(context.Background(), stmt); err != nil {
				t.Fatal(err)
			}
		}
		e.probe = kind
		faultkit.InstallAudit(t, e.DB, e.Schema.Name, faultkit.ProbeKind)
	}
	return e
}

// worker returns the settings of a worker named node that works every kind of e.
func (e *frEnv) WorkerSettings(node string) faultkit.WorkerSettings {
	s := e.World.WorkerSettings(node)
	if e.plain != nil {
		s.PlainKind = faultkit.RedisPlainKind
	}
	if e.probe != nil {
		s.Probes = true
	}
	return s
}

// startWorkers starts a worker named after each of names, with the settings set gives it, and waits
// until each is working.
func (e *frEnv) startWorkers(t *testing.T, set func(s *faultkit.WorkerSettings), names ...string) []*faultkit.Worker {
	t.Helper()
	var workers []*faultkit.Worker
	for _, name := range names {
		s := e.WorkerSettings(name)
		set(&s)
		workers = append(workers, faultkit.StartWorker(t, s))
	}
	faultkit.WaitReady(t, 60*time.Second, workers...)
	return workers
}

// startProbes enqueues n probe jobs (keys 1 to n) and returns their ids.
func (e *frEnv) startProbes(t *testing.T, n int) map[int64]faultkit.KeyedJob {
	t.Helper()
	jobs := make([]faultkit.ProbeJob, n)
	for i := range jobs {
		jobs[i] = faultkit.ProbeJob{Probe: int64(i + 1)}
	}
	res, err := dispatcher.EnqueueMany(context.Background(), e.DB, e.probe, jobs)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int64]faultkit.KeyedJob{}
	for i, r := range res {
		if r.Err != nil || r.Duplicate {
			t.Fatalf("enqueue probe %+v: %+v", jobs[i], r)
		}
		ids[r.ID] = faultkit.KeyedJob{BlogID: faultkit.ProbeBlogBase + jobs[i].Probe, Seq: jobs[i].Seq}
	}
	return ids
}

// stopProbes ends every probe job (at its next tick).
func (e *frEnv) stopProbes(t *testing.T) {
	t.Helper()
	if _, err := e.DB.Exec(context.Background(), `INSERT INTO fr_probe_stop VALUES (true)`); err != nil {
		t.Fatal(err)
	}
}

// frLatency summarises how long a set of calls took.
type frLatency struct {
	N, Failed     int
	P50, P99, Max time.Duration
}

// String shows the summary in the figures and the log.
func (l frLatency) String() string {
	return fmt.Sprintf("%d calls (%d failed), p50 %v, p99 %v, max %v", l.N, l.Failed,
		l.P50.Round(10*time.Microsecond), l.P99.Round(10*time.Microsecond), l.Max.Round(10*time.Microsecond))
}

// frSummarise summarises durations, failed of which failed.
func frSummarise(took []time.Duration, failed int) frLatency {
	l := frLatency{N: len(took), Failed: failed}
	if len(took) == 0 {
		return l
	}
	slices.Sort(took)
	at := func(q float64) time.Duration { return took[min(len(took)-1, int(q*float64(len(took))))] }
	l.P50, l.P99, l.Max = at(0.5), at(0.99), took[len(took)-1]
	return l
}

// heartbeats summarises the probe jobs' heartbeats sent in [from, to).
func (e *frEnv) heartbeats(t *testing.T, from, to time.Time) frLatency {
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
	return frSummarise(took, failed)
}

// startLag summarises how long the keyed kind's jobs that started in [from, to), on their first
// attempt, waited from their enqueue to their start: the dispatch latency, which slow lock calls
// lengthen before they cut throughput.
func (e *frEnv) startLag(t *testing.T, from, to time.Time) frLatency {
	t.Helper()
	rows, err := e.DB.Query(context.Background(), `SELECT (extract(epoch FROM l.started_at - j.created_at) * 1e6)::bigint
		FROM mp_ledger l JOIN `+faultkit.KeyedKind+` j ON j.id = l.job_id
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
	return frSummarise(lags, 0)
}

// frLockProbe makes lock calls from the test process against a scenario's nodes, with the workers'
// client settings, TTL and call timeout, and times each: a TryExec, Extend and Release cycle every
// frLockProbeEvery, on keys under a prefix of its own (which CheckQuiet does not look at).
type frLockProbe struct {
	locker  *execlock.Locker
	clients []*redis.Client

	mu      sync.Mutex
	samples []frLockSample

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// frLockSample is one timed lock call.
type frLockSample struct {
	At   time.Time // when it started
	Op   string
	Took time.Duration
	Err  error
}

const frLockProbeEvery = 20 * time.Millisecond

// startLockProbe starts probing addrs with locks of ttl (the workers' LeaseTTL, so that the call
// timeout is theirs too). It stops when t ends, if not before.
func startLockProbe(t *testing.T, addrs []string, ttl time.Duration) *frLockProbe {
	t.Helper()
	clients, err := execlock.NewClients(addrs...)
	if err != nil {
		t.Fatal(err)
	}
	locker, err := execlock.New(&execlock.Config{Nodes: clients, Prefix: "jpfrprobe:", NodeName: "probe", ExecTTL: ttl, QueueTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	p := &frLockProbe{locker: locker, clients: clients, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	t.Cleanup(p.Stop)
	return p
}

// run is the probe's loop: a cycle every frLockProbeEvery, over 8 keys, until Stop.
func (p *frLockProbe) run() {
	defer close(p.done)
	ctx := context.Background()
	tick := time.NewTicker(frLockProbeEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		var lk *execlock.Lock
		p.timed("TryExec", func() (err error) {
			lk, err = p.locker.TryExec(ctx, "probe", fmt.Sprint(i%8), 0)
			return err
		})
		if lk == nil {
			continue
		}
		p.timed("Extend", func() error { return lk.Extend(ctx) })
		p.timed("Release", func() error { return lk.Release(ctx) })
	}
}

// timed runs call and records how long it took and how it ended.
func (p *frLockProbe) timed(op string, call func() error) {
	at := time.Now()
	err := call()
	s := frLockSample{At: at, Op: op, Took: time.Since(at), Err: err}
	p.mu.Lock()
	p.samples = append(p.samples, s)
	p.mu.Unlock()
}

// Stop ends the probe and closes its locker and clients; a second Stop does nothing.
func (p *frLockProbe) Stop() {
	p.stopOnce.Do(func() {
		close(p.stop)
		<-p.done
		p.locker.Close()
		for _, c := range p.clients {
			_ = c.Close()
		}
	})
}

// between summarises the calls that started in [from, to).
func (p *frLockProbe) between(from, to time.Time) frLatency {
	p.mu.Lock()
	defer p.mu.Unlock()
	var took []time.Duration
	failed := 0
	for _, s := range p.samples {
		if s.At.Before(from) || !s.At.Before(to) {
			continue
		}
		took = append(took, s.Took)
		if s.Err != nil {
			failed++
		}
	}
	return frSummarise(took, failed)
}

// frFeeder enqueues jobs at a steady rate from a goroutine of its own while a scenario runs: keyed jobs
// round-robin over its keys (each key's seq counting up, so that its order can be checked), and plain
// jobs. A steady offered load, well under what the workers sustain, makes throughput before, during
// and after a fault comparable on a machine shared with other tests: a healthy system keeps up with it
// whatever its spare capacity, and one that a fault slows falls behind.
type frFeeder struct {
	e                    *frEnv
	keys                 []int64
	keyedRate, plainRate float64

	mu        sync.Mutex
	keyed     faultkit.Enqueued
	plainJobs map[int64]faultkit.KeyedJob
	seq       map[int64]int64
	nextPlain int64
	err       error

	stop, done chan struct{}
}

// startFeeder feeds keyedRate keyed jobs per second over keys, and plainRate plain jobs per second,
// until Stop.
func (e *frEnv) startFeeder(t *testing.T, keys []int64, keyedRate, plainRate float64) *frFeeder {
	t.Helper()
	if plainRate > 0 && e.plain == nil {
		t.Fatal("startFeeder: a plain rate without the plain kind")
	}
	f := &frFeeder{e: e, keys: keys, keyedRate: keyedRate, plainRate: plainRate, keyed: faultkit.Enqueued{},
		plainJobs: map[int64]faultkit.KeyedJob{}, seq: map[int64]int64{}, nextPlain: faultkit.RedisPlainBlogBase,
		stop: make(chan struct{}), done: make(chan struct{})}
	go f.run()
	t.Cleanup(func() {
		select {
		case <-f.stop:
		default:
			close(f.stop)
		}
		<-f.done
	})
	return f
}

// run is the feeder's loop: every 50 ms it enqueues what the rates call for by then.
func (f *frFeeder) run() {
	defer close(f.done)
	began := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var keyedSent, plainSent int
	for {
		select {
		case <-f.stop:
			return
		case <-tick.C:
		}
		elapsed := time.Since(began).Seconds()
		// At most a second's worth at once: after a stall of the feeder itself, it does not flood.
		k := min(int(f.keyedRate*elapsed)-keyedSent, int(f.keyedRate)+1)
		p := min(int(f.plainRate*elapsed)-plainSent, int(f.plainRate)+1)
		if err := f.feed(k, p); err != nil {
			f.mu.Lock()
			f.err = errors.Join(f.err, err)
			f.mu.Unlock()
			return
		}
		keyedSent, plainSent = int(f.keyedRate*elapsed), int(f.plainRate*elapsed)
	}
}

// feed enqueues k keyed and p plain jobs.
func (f *frFeeder) feed(k, p int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if k > 0 {
		f.mu.Lock()
		jobs := make([]faultkit.KeyedJob, k)
		for i := range jobs {
			b := f.keys[(len(f.keyed)+i)%len(f.keys)]
			jobs[i] = faultkit.KeyedJob{BlogID: b, Seq: f.seq[b]}
			f.seq[b]++
		}
		f.mu.Unlock()
		res, err := dispatcher.EnqueueMany(ctx, f.e.DB, f.e.Kind, jobs)
		if err != nil {
			return fmt.Errorf("feeding keyed jobs: %w", err)
		}
		f.mu.Lock()
		for i, r := range res {
			if r.Err != nil || r.Duplicate {
				f.mu.Unlock()
				return fmt.Errorf("feeding %+v: %+v", jobs[i], r)
			}
			f.keyed[r.ID] = jobs[i]
		}
		f.mu.Unlock()
	}
	if p > 0 {
		jobs := make([]faultkit.PlainJob, p)
		for i := range jobs {
			jobs[i] = faultkit.PlainJob{BlogID: f.nextPlain, Seq: f.nextPlain}
			f.nextPlain++
		}
		res, err := dispatcher.EnqueueMany(ctx, f.e.DB, f.e.plain, jobs)
		if err != nil {
			return fmt.Errorf("feeding plain jobs: %w", err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, r := range res {
			if r.Err != nil || r.Duplicate {
				return fmt.Errorf("feeding %+v: %+v", jobs[i], r)
			}
			f.plainJobs[r.ID] = faultkit.KeyedJob{BlogID: jobs[i].BlogID, Seq: jobs[i].Seq}
		}
	}
	return nil
}

// Stop stops feeding and fails t if a feed failed. It returns what was fed: keyed and plain jobs by id.
func (f *frFeeder) Stop(t *testing.T) (keyed, plain map[int64]faultkit.KeyedJob) {
	t.Helper()
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		t.Fatal(f.err)
	}
	return f.keyed, f.plainJobs
}

// frLoad is a scenario's steady work: the feed, the probe jobs (when the environment has the probe
// kind) and the lock probe (when asked for).
type frLoad struct {
	e      *frEnv
	feed   *frFeeder
	locks  *frLockProbe                // nil unless asked for
	probes map[int64]faultkit.KeyedJob // the probe jobs, by id
}

// frLoadSpec says what load a scenario runs.
type frLoadSpec struct {
	Keys                 int     // keyed jobs go round-robin over blogs 1 to Keys
	KeyedRate, PlainRate float64 // jobs per second
	Probes               int     // probe jobs, one per key (the environment needs the probe kind)
	LockProbe            bool    // time lock calls from the test process (startLockProbe)
}

// startLoad starts the load spec describes.
func (e *frEnv) startLoad(t *testing.T, spec frLoadSpec) *frLoad {
	t.Helper()
	l := &frLoad{e: e}
	if spec.Probes > 0 {
		l.probes = e.startProbes(t, spec.Probes)
	}
	if spec.LockProbe {
		l.locks = startLockProbe(t, e.Addrs, frLeaseTTL)
	}
	keys := make([]int64, spec.Keys)
	for i := range keys {
		keys[i] = int64(i + 1)
	}
	l.feed = e.startFeeder(t, keys, spec.KeyedRate, spec.PlainRate)
	return l
}

// stop ends the load and returns the keyed and plain jobs fed.
func (l *frLoad) stop(t *testing.T) (keyed, plain map[int64]faultkit.KeyedJob) {
	t.Helper()
	keyed, plain = l.feed.Stop(t)
	if l.locks != nil {
		l.locks.Stop()
	}
	if l.probes != nil {
		l.e.stopProbes(t)
	}
	return keyed, plain
}

// phases runs a scenario's phases once its workers and load run: a warm-up (frWarmUp), phase before
// the fault, then fault and during (the fault's own waiting is fault's), a check that no worker exited
// meanwhile, then heal and phase after it. It returns the phases' windows: Fault is taken just before
// fault, Heal just before heal.
func (e *frEnv) phases(t *testing.T, workers []*faultkit.Worker, phase, during time.Duration, fault, heal func()) frWindows {
	t.Helper()
	time.Sleep(frWarmUp)
	var w frWindows
	w.Start = e.Now(t)
	time.Sleep(phase)
	w.Fault = e.Now(t)
	fault()
	time.Sleep(during)
	frCheckAlive(t, "the fault", workers...)
	w.Heal = e.Now(t)
	heal()
	time.Sleep(phase)
	w.End = e.Now(t)
	return w
}

// frOutageBound is how long after a lock outage began (no quorum of nodes answering) a keyed job may
// still start: only on a lock taken before it. Its TryExec returns within a call timeout, the queue
// lock's release takes at most another, and the handler's first ledger write a moment more on a
// loaded machine.
const frOutageBound = 2*frCallTimeout + time.Second

// checkNoKeyedStart fails t for every job of a keyed kind (the keyed kind's and the probe kind's) that
// started in (since+frOutageBound, until): during a lock outage none may. It returns the last such
// start in [since, until), and the first at or after until (zero when none).
func (e *frEnv) checkNoKeyedStart(t *testing.T, since, until time.Time) (last, firstAfter time.Time) {
	t.Helper()
	for _, m := range e.Ledger(t) {
		if m.BlogID >= faultkit.RedisPlainBlogBase && m.BlogID < faultkit.ProbeBlogBase {
			continue // the plain kind's
		}
		switch {
		case !m.StartedAt.Before(since) && m.StartedAt.Before(until):
			last = m.StartedAt
			if m.StartedAt.After(since.Add(frOutageBound)) {
				t.Errorf("a keyed job started %v into the lock outage: %v", m.StartedAt.Sub(since), m)
			}
		case !m.StartedAt.Before(until) && firstAfter.IsZero():
			firstAfter = m.StartedAt
		}
	}
	return last, firstAfter
}

// frWindows are a scenario's phases, on the database's clock (the ledger's): before the fault, during
// it, and after it healed.
type frWindows struct {
	Start, Fault, Heal, End time.Time
}

// frRates is a kind's throughput (handler calls ended ok per second) in each phase.
type frRates struct{ Before, During, After float64 }

// rates measures the throughput of ledgerKind's calls ("" for the keyed kind) in each phase.
func (w frWindows) rates(t *testing.T, db *pgxpool.Pool, ledgerKind string) frRates {
	t.Helper()
	return frRates{faultkit.LedgerRate(t, db, ledgerKind, w.Start, w.Fault), faultkit.LedgerRate(t, db, ledgerKind, w.Fault, w.Heal),
		faultkit.LedgerRate(t, db, ledgerKind, w.Heal, w.End)}
}

// logSeries logs, for each second of the windows, how many keyed and plain calls ended ok and the
// keyed kind's worst start lag (see startLag), so that a throughput figure can be traced to the moment
// that made it.
func (e *frEnv) logSeries(t *testing.T, w frWindows) {
	t.Helper()
	rows, err := e.DB.Query(context.Background(), `WITH s AS (
		SELECT g AS at FROM generate_series($1::timestamptz, $2::timestamptz, interval '1 second') g)
	SELECT (extract(epoch FROM s.at - $1::timestamptz))::int,
		(SELECT count(*) FROM mp_ledger l WHERE l.kind IS NULL AND l.outcome = 'ok' AND l.ended_at >= s.at AND l.ended_at < s.at + interval '1 second'),
		(SELECT count(*) FROM mp_ledger l WHERE l.kind = $3 AND l.outcome = 'ok' AND l.ended_at >= s.at AND l.ended_at < s.at + interval '1 second'),
		(SELECT coalesce(max(l.started_at - j.created_at), '0') FROM mp_ledger l JOIN `+faultkit.KeyedKind+` j ON j.id = l.job_id
			WHERE l.kind IS NULL AND l.attempt = 1 AND l.started_at >= s.at AND l.started_at < s.at + interval '1 second')
	FROM s ORDER BY s.at`, w.Start, w.End, faultkit.RedisPlainKind)
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

// frRecovery is how long after from the throughput of ledgerKind's calls ("" for the keyed kind) first
// reached want jobs/s over a window of a second: the start of the first such window (windows start
// every 50 ms from from on, and end before to), or -1 if none did.
func frRecovery(t *testing.T, db *pgxpool.Pool, ledgerKind string, from, to time.Time, want float64) time.Duration {
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

// frCheckAlive fails t for every worker that has exited: none may, during a fault.
func frCheckAlive(t *testing.T, during string, workers ...*faultkit.Worker) {
	t.Helper()
	for _, w := range workers {
		if state, exited := w.Exited(); exited {
			t.Errorf("worker %s exited during %s: %v", w.Name, during, state)
		}
	}
}

// frSignal stops (SIGSTOP) or continues (SIGCONT) a worker process.
func frSignal(t *testing.T, w *faultkit.Worker, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(w.Pid, sig); err != nil {
		t.Fatalf("%v to worker %s: %v", sig, w.Name, err)
	}
}

// frLeaseLost tells whether a call ended because its lease was lost.
func frLeaseLost(m faultkit.Call) bool {
	return m.Outcome != nil && strings.HasPrefix(*m.Outcome, dispatcher.ErrLeaseLost.Error())
}

// frKindJobs is what a scenario enqueued of one kind, for frCheckJobs.
type frKindJobs struct {
	Table      string                      // the kind's table
	LedgerKind string                      // its calls' kind in the ledger, "" for the keyed kind
	Keyed      bool                        // a blog's jobs must run one at a time, in seq order
	Jobs       map[int64]faultkit.KeyedJob // by id: blog and seq as enqueued (the ledger's blog for other kinds)
}

// frJobFigures is what frCheckJobs counted.
type frJobFigures struct {
	Jobs, Calls int
	Lost        int // jobs not processed (failed or never finished)
	Duplicates  int // jobs whose handler ended ok more than once
	LeaseLost   int // calls ended because their lease was lost
	// StaleOverlaps counts calls of a key that ran beside a call whose token a rescue had taken back
	// (proven lease loss); such calls are exempt from the key's one-at-a-time check.
	StaleOverlaps int
}

// frCheckJobs checks the jobs of one kind against their rows, the ledger and the audit:
//   - lost = 0: every job processed, none failed;
//   - a job's handler ended ok more than once only after a proven lease loss: each ok call but the one
//     holding the row's final token had its token taken back by a rescue (fault_audit), so that its
//     finish could change nothing;
//   - every call ended (nothing stays stuck once the fault has healed), and belongs to an enqueued job
//     with the enqueued blog and seq;
//   - for a keyed kind, per blog: calls start in seq order, and never two at once, except beside a
//     call whose token a rescue had taken back (a stale holder, counted in StaleOverlaps).
func (e *frEnv) frCheckJobs(t *testing.T, k frKindJobs) frJobFigures {
	t.Helper()
	ctx := context.Background()
	fig := frJobFigures{Jobs: len(k.Jobs)}
	type rowState struct {
		processed, failed bool
		token             int64
	}
	rows, err := e.DB.Query(ctx, `SELECT id, processed_at IS NOT NULL, failed_at IS NOT NULL, lock_token FROM `+pgx.Identifier{k.Table}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	state := map[int64]rowState{}
	var id int64
	var st rowState
	if _, err := pgx.ForEachRow(rows, []any{&id, &st.processed, &st.failed, &st.token}, func() error {
		state[id] = st
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	type jobToken struct{ job, token int64 }
	rescued := map[jobToken]time.Time{}
	rows, err = e.DB.Query(ctx, `SELECT job_id, old_token, at FROM fault_audit
		WHERE kind = $1 AND old_state = 'running' AND new_state <> 'running' AND new_token > old_token`, k.Table)
	if err != nil {
		t.Fatal(err)
	}
	var jt jobToken
	var at time.Time
	if _, err := pgx.ForEachRow(rows, []any{&jt.job, &jt.token, &at}, func() error {
		rescued[jt] = at
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	report := faultkit.NewFailureLog(t, k.Table)
	defer report.Done()
	var calls []faultkit.Call
	lo, hi := int64(0), int64(faultkit.RedisPlainBlogBase)
	switch k.LedgerKind {
	case faultkit.RedisPlainKind:
		lo, hi = faultkit.RedisPlainBlogBase, faultkit.ProbeBlogBase
	case faultkit.ProbeKind:
		lo, hi = faultkit.ProbeBlogBase, 1<<62
	}
	for _, m := range e.Ledger(t) {
		if m.BlogID >= lo && m.BlogID < hi {
			calls = append(calls, m)
		}
	}
	fig.Calls = len(calls)
	ok := map[int64][]faultkit.Call{}
	for _, m := range calls {
		want, known := k.Jobs[m.JobID]
		switch {
		case !known:
			report.Errorf("%s: the ledger names job %d, which was never enqueued: %v", k.Table, m.JobID, m)
		case m.BlogID != want.BlogID || m.Seq != want.Seq:
			report.Errorf("%s: job %d ran as blog %d seq %d, enqueued as blog %d seq %d", k.Table, m.JobID, m.BlogID, m.Seq, want.BlogID, want.Seq)
		case m.EndedAt == nil || m.Outcome == nil:
			report.Errorf("%s: a handler call never ended: %v", k.Table, m)
		case *m.Outcome == "ok":
			ok[m.JobID] = append(ok[m.JobID], m)
		case frLeaseLost(m):
			fig.LeaseLost++
		}
	}
	for id := range k.Jobs {
		s, found := state[id]
		if !found || !s.processed || s.failed {
			fig.Lost++
			report.Errorf("%s: job %d lost: row %+v (found %v), %d ok calls", k.Table, id, s, found, len(ok[id]))
			continue
		}
		if len(ok[id]) > 1 {
			fig.Duplicates++
			for _, m := range ok[id] {
				if _, proven := rescued[jobToken{id, m.Token}]; m.Token != s.token && !proven {
					report.Errorf("%s: job %d ran to ok more than once, and %v's token was never taken back: no proven lease loss", k.Table, id, m)
				}
			}
		}
	}
	if !k.Keyed {
		return fig
	}
	byBlog := map[int64][]faultkit.Call{}
	for _, m := range calls {
		byBlog[m.BlogID] = append(byBlog[m.BlogID], m)
	}
	for blog, ms := range byBlog {
		sort.SliceStable(ms, func(i, j int) bool { return ms[i].StartedAt.Before(ms[j].StartedAt) })
		var holder *faultkit.Call // the latest call not known stale
		for i := range ms {
			m := &ms[i]
			if i > 0 && m.Seq < ms[i-1].Seq {
				report.Errorf("%s: blog %d: %v started after %v, against seq order", k.Table, blog, *m, ms[i-1])
			}
			_, stale := rescued[jobToken{m.JobID, m.Token}]
			for _, o := range ms[:i] {
				if o.EndedAt == nil || o.EndedAt.After(m.StartedAt) {
					if _, oStale := rescued[jobToken{o.JobID, o.Token}]; oStale || stale {
						fig.StaleOverlaps++
					}
				}
			}
			if stale {
				continue
			}
			if holder != nil && (holder.EndedAt == nil || !holder.EndedAt.Before(m.StartedAt)) {
				report.Errorf("%s: blog %d: two calls holding their lease ran at once: %v and %v", k.Table, blog, *holder, *m)
			}
			holder = m
		}
	}
	return fig
}

// waitProcessed waits until every job of ids is processed in table. After within it fails t with the
// states of the jobs still not processed.
func (e *frEnv) waitProcessed(t *testing.T, table string, ids map[int64]faultkit.KeyedJob, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	list := make([]int64, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	tbl := pgx.Identifier{table}.Sanitize()
	deadline := time.Now().Add(within)
	for {
		var n int
		if err := e.DB.QueryRow(ctx, `SELECT count(*) FROM `+tbl+` WHERE id = ANY ($1) AND processed_at IS NOT NULL`, list).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == len(list) {
			return
		}
		if time.Now().After(deadline) {
			rows, err := e.DB.Query(ctx, `SELECT format('job %s: attempts %s, token %s, due %s, lease %s by %s, failed %s, last error %s',
				id, attempts_made, lock_token, process_after, lease_expires_at, lease_owner, failed_at, last_error)
				FROM `+tbl+` WHERE id = ANY ($1) AND processed_at IS NULL ORDER BY id LIMIT 5`, list)
			if err != nil {
				t.Fatal(err)
			}
			some, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			t.Fatalf("after %v, %d of the %d jobs of %s are not processed; the first: %v (now %v)", within, len(list)-n, len(list), table, some, e.Now(t))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// frMerge returns the union of job sets.
func frMerge(sets ...map[int64]faultkit.KeyedJob) map[int64]faultkit.KeyedJob {
	out := map[int64]faultkit.KeyedJob{}
	for _, s := range sets {
		for id, j := range s {
			out[id] = j
		}
	}
	return out
}

// finish ends a scenario once its fault has healed: it waits until every job of kinds is processed,
// stops the workers with SIGTERM (each must exit 0 within 10 s), checks that they left nothing leased or
// locked (CheckQuiet), then runs frCheckJobs and CheckAudit (each job completed exactly once) on each
// kind, and the keyed kind's claim order (CheckOrder). It returns
// the workers' summed stats and each kind's figures, in the order of kinds.
func (e *frEnv) finish(t *testing.T, workers []*faultkit.Worker, kinds ...frKindJobs) (dispatcher.Stats, []frJobFigures) {
	t.Helper()
	for _, k := range kinds {
		e.waitProcessed(t, k.Table, k.Jobs, 60*time.Second)
	}
	frCheckAlive(t, "the scenario", workers...)
	faultkit.Terminate(t, workers...)
	e.CheckQuiet(t)
	var figs []frJobFigures
	for _, k := range kinds {
		figs = append(figs, e.frCheckJobs(t, k))
		if a := faultkit.CheckAudit(t, e.DB, k.Table, k.LedgerKind); a.Completions != len(k.Jobs) {
			t.Errorf("%s: %d completions audited for %d jobs, want one each", k.Table, a.Completions, len(k.Jobs))
		}
	}
	e.CheckOrder(t)
	return faultkit.SumStats(t, workers), figs
}
