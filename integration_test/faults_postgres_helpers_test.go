package integration_test

// What the PostgreSQL fault scenarios (faults_postgres_test.go) share: a private PostgreSQL cluster
// that the test may restart and whose backends it may terminate (never the shared server), worker
// processes working a keyed and a plain kind on it, a steady offered load, and the checks that hold
// after every such fault: nothing lost or stuck, every re-run explained by the audit.

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
	"github.com/jobpipe/jobpipe/internal/pgproc"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// Names of the PostgreSQL scenarios' plain kind and of their connections on the private cluster.
const (
	pgfPlainKind  = "pgf_plain"
	pgfWorkerApp  = "jobpipe-fault-worker" // the workers' dispatchers (pool and LISTEN connection)
	pgfLedgerApp  = "jobpipe-fault-ledger" // the workers' ledger pools
	pgfKeyedBlogs = 40                     // keys of the keyed kind's load: blog ids 1 to 40
	// pgfPlainBlogBase starts the plain jobs' blog ids (one per job), apart from the keyed kind's, so
	// that mp_conc counts each plain job alone: CheckConc then also shows that no job ran twice at once.
	pgfPlainBlogBase = 1_000_000
	pgfLeaseTTL      = 6 * time.Second
	pgfRetryDelay    = 200 * time.Millisecond
)

// pgfEnv is a PostgreSQL scenario's world: the private cluster, the World in a schema on it (keyed
// kind, ledger tables), the plain kind, both audited, and the worker processes.
type pgfEnv struct {
	*faultkit.World
	pg      *pgproc.Cluster
	plain   *jobinfo.Kind[faultkit.PlainJob]
	ledger  *pgxpool.Pool // where the workers write the ledger: e.db, or a schema on a second private cluster
	workers []*faultkit.Worker

	opts      pgfOptions
	ledgerURL string // the workers' JPW_LEDGER_URL
}

// pgfOptions choose a scenario's setup.
type pgfOptions struct {
	settings        map[string]string // the private cluster's extra settings
	ledgerElsewhere bool              // the ledger on a second private cluster, which the faults do not touch
	workers         int
	later           int // more workers the scenario starts itself (startWorker), reserved with the others
	concurrency     int
	leaseTTL        time.Duration                  // the workers' LeaseTTL; 0: pgfLeaseTTL
	tune            func(*faultkit.WorkerSettings) // adjusts every worker's settings; nil: none
}

// newPGFEnv starts the private cluster, a Redis node, the schema and kinds, and the worker processes
// (working both kinds, their dispatchers' connections named pgfWorkerApp), and waits until they are
// ready.
func newPGFEnv(t *testing.T, o pgfOptions) *pgfEnv {
	t.Helper()
	faultkit.Reserve(t, o.workers+o.later)
	pg := testenv.StartPostgres(t, o.settings)
	nodes := testenv.StartRedisNodes(t, 1)
	addrs, clients := faultkit.NodeAddrs(nodes)
	e := &pgfEnv{pg: pg, World: faultkit.NewWorldIn(t, testenv.NewSchemaOn(t, pg.URL), pgfRetryDelay, addrs, clients, "jpf:"), opts: o}
	e.plain = e.AddPlainKind(t, pgfPlainKind, pgfRetryDelay)
	faultkit.InstallAudit(t, e.DB, e.Schema.Name, faultkit.KeyedKind)
	faultkit.InstallAudit(t, e.DB, e.Schema.Name, pgfPlainKind)
	ledgerURL := pgfWithParam(t, e.Schema.URL, "application_name", pgfLedgerApp)
	e.ledger = e.DB
	if o.ledgerElsewhere {
		l := testenv.NewSchemaOn(t, testenv.StartPostgres(t, nil).URL)
		for _, stmt := range []string{faultkit.LedgerDDL, faultkit.ReleaseDDL, faultkit.ConcDDL} {
			if _, err := l.Pool.Exec(context.Background(), stmt); err != nil {
				t.Fatal(err)
			}
		}
		ledgerURL, e.ledger = l.URL, l.Pool
	}
	e.ledgerURL = ledgerURL
	for i := range o.workers {
		e.workers = append(e.workers, e.startWorker(t, fmt.Sprintf("pgw%d", i)))
	}
	faultkit.WaitReady(t, 60*time.Second, e.workers...)
	return e
}

// startWorker starts a worker process named node, working both kinds with the scenario's settings
// and then tune's, without waiting until it is ready.
func (e *pgfEnv) startWorker(t *testing.T, node string, tune ...func(*faultkit.WorkerSettings)) *faultkit.Worker {
	t.Helper()
	s := e.WorkerSettings(node)
	s.DatabaseURL = pgfWithParam(t, e.Schema.URL, "application_name", pgfWorkerApp)
	s.SleepMin, s.SleepMax = time.Millisecond, 3*time.Millisecond
	s.LeaseTTL, s.RescueInterval, s.RetryDelay, s.Concurrency = cmp.Or(e.opts.leaseTTL, pgfLeaseTTL), time.Second, pgfRetryDelay, e.opts.concurrency
	s.PlainKind, s.LedgerURL = pgfPlainKind, e.ledgerURL
	if e.opts.tune != nil {
		e.opts.tune(&s)
	}
	for _, f := range tune {
		f(&s)
	}
	return faultkit.StartWorker(t, s)
}

// pgfWithParam returns the connection URL u with the query parameter key set to value.
func pgfWithParam(t *testing.T, u, key, value string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	q.Set(key, value)
	// Encode writes a space as "+", which libpq and pgx read as a plus sign (see testenv's URLs).
	p.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return p.String()
}

// checkAlive fails t for every worker process that has exited: a fault must never end one.
func (e *pgfEnv) checkAlive(t *testing.T, when string) {
	t.Helper()
	for _, w := range e.workers {
		if state, exited := w.Exited(); exited {
			t.Errorf("%s: worker %s exited (%v)", when, w, state)
		}
	}
}

// pgfLoad offers jobs at a steady rate: every tick it enqueues what the rate owes since it began,
// so that jobs a failed enqueue (the server down) did not insert are offered again at the next one.
type pgfLoad struct {
	e                    *pgfEnv
	plainRate, keyedRate float64 // jobs per second
	began                time.Time

	mu             sync.Mutex
	plainIDs       []int64
	keyedIDs       []int64
	plainN, keyedN int // jobs offered so far (seq numbers)
	failures       int // enqueue calls that failed

	stop, done chan struct{}
}

// StartLoad starts offering plainRate plain and keyedRate keyed jobs per second.
func (e *pgfEnv) startLoad(plainRate, keyedRate float64) *pgfLoad {
	l := &pgfLoad{e: e, plainRate: plainRate, keyedRate: keyedRate, began: time.Now(),
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *pgfLoad) run() {
	defer close(l.done)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		elapsed := time.Since(l.began).Seconds()
		l.offerPlain(int(elapsed*l.plainRate) - l.plainN)
		l.offerKeyed(int(elapsed*l.keyedRate) - l.keyedN)
	}
}

// offerPlain enqueues n plain jobs (at most 2,000 at once).
func (l *pgfLoad) offerPlain(n int) {
	n = min(n, 2000)
	if n <= 0 {
		return
	}
	jobs := make([]faultkit.PlainJob, n)
	for i := range jobs {
		seq := int64(l.plainN + i)
		jobs[i] = faultkit.PlainJob{BlogID: pgfPlainBlogBase + seq, Seq: seq}
	}
	ids, ok := pgfEnqueue(l.e.DB, l.e.plain, jobs)
	l.record(ok, func() { l.plainIDs = append(l.plainIDs, ids...); l.plainN += n })
}

// offerKeyed enqueues n keyed jobs spread over pgfKeyedBlogs keys (at most 2,000 at once).
func (l *pgfLoad) offerKeyed(n int) {
	n = min(n, 2000)
	if n <= 0 {
		return
	}
	jobs := make([]faultkit.KeyedJob, n)
	for i := range jobs {
		seq := int64(l.keyedN + i)
		jobs[i] = faultkit.KeyedJob{BlogID: 1 + seq%pgfKeyedBlogs, Seq: seq}
	}
	ids, ok := pgfEnqueue(l.e.DB, l.e.Kind, jobs)
	l.record(ok, func() { l.keyedIDs = append(l.keyedIDs, ids...); l.keyedN += n })
}

func (l *pgfLoad) record(ok bool, add func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ok {
		l.failures++
		return
	}
	add()
}

// reference is what a scenario's throughput ratios compare with: the baseline's completions per
// second, capped at the offered rate, since a baseline window may include the catch-up of a backlog
// (the workers' start, or a moment's stall of the machine), which no later window can match.
func (l *pgfLoad) reference(base pgfRates) pgfRates {
	return pgfRates{plain: min(base.plain, l.plainRate), keyed: min(base.keyed, l.keyedRate)}
}

// pgfEnqueue enqueues jobs in one statement and returns their ids, or false when it failed. A failure
// whose statement committed nonetheless (the server went away before answering) leaves rows this
// load does not know of: the scenarios check every row of the tables, not only the known ids.
func pgfEnqueue[T any](db *pgxpool.Pool, kind *jobinfo.Kind[T], jobs []T) ([]int64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := dispatcher.EnqueueMany(ctx, db, kind, jobs)
	if err != nil {
		return nil, false
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		if r.Err != nil {
			return nil, false
		}
		ids[i] = r.ID
	}
	return ids, true
}

// Stop stops offering and returns how many jobs of each kind were enqueued and how many enqueue
// calls failed.
func (l *pgfLoad) Stop() (plain, keyed []int64, failures int) {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.plainIDs, l.keyedIDs, l.failures
}

// pgfEnds returns when the handler calls of ledgerKind ("" for the keyed kind) that ended ok in
// [from, to) ended, in order.
func pgfEnds(t *testing.T, db *pgxpool.Pool, ledgerKind string, from, to time.Time) []time.Time {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT ended_at FROM mp_ledger
		WHERE coalesce(kind, '') = $1 AND outcome = 'ok' AND ended_at >= $2 AND ended_at < $3 ORDER BY ended_at`,
		ledgerKind, from, to)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		t.Fatal(err)
	}
	return ends
}

// pgfRecovery is how long after up the completions of ledgerKind ("" for the keyed kind) were back
// at frac of ref (jobs per second): the end of the first window of w, starting at or after up, in
// which that many ended ok. ok is false when none did within limit.
func pgfRecovery(t *testing.T, db *pgxpool.Pool, ledgerKind string, up time.Time, ref, frac float64, w, limit time.Duration) (time.Duration, bool) {
	t.Helper()
	ends := pgfEnds(t, db, ledgerKind, up, up.Add(limit))
	need := int(frac * ref * w.Seconds())
	for start := up; !start.Add(w).After(up.Add(limit)); start = start.Add(50 * time.Millisecond) {
		from := sort.Search(len(ends), func(i int) bool { return !ends[i].Before(start) })
		to := sort.Search(len(ends), func(i int) bool { return !ends[i].Before(start.Add(w)) })
		if to-from >= need {
			return start.Add(w).Sub(up), true
		}
	}
	return limit, false
}

// longestStall is the longest time in [from, to) in which no job of ledgerKind ("" for the keyed
// kind) ended ok: under a steady offered load, how long the workers stood still at worst.
func (e *pgfEnv) longestStall(t *testing.T, ledgerKind string, from, to time.Time) time.Duration {
	t.Helper()
	last, longest := from, time.Duration(0)
	for _, end := range append(pgfEnds(t, e.ledger, ledgerKind, from, to), to) {
		longest = max(longest, end.Sub(last))
		last = end
	}
	return longest
}

// drain waits until every row of both kinds' tables is processed or failed and returns how
// long that took; it fails t when some are still waiting or running after within.
func (e *pgfEnv) drain(t *testing.T, within time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	var open map[string]int
	for {
		open = map[string]int{}
		for _, tbl := range []string{faultkit.KeyedKind, pgfPlainKind} {
			var waiting, running int
			if err := e.DB.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE lease_expires_at IS NULL),
				count(*) FILTER (WHERE lease_expires_at IS NOT NULL) FROM `+tbl+` WHERE processed_at IS NULL AND failed_at IS NULL`).
				Scan(&waiting, &running); err != nil {
				t.Fatal(err)
			}
			if waiting+running > 0 {
				open[tbl+" waiting"], open[tbl+" running"] = waiting, running
			}
		}
		if len(open) == 0 {
			return time.Since(began)
		}
		if time.Since(began) > within {
			e.logSessions(t)
			t.Fatalf("%v after the load stopped, jobs are still open: %v", within, open)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pgfOutcome is what became of one kind's jobs.
type pgfOutcome struct {
	Rows, Known, Lost, Failed int // rows in the table; ids the load knows; known ids missing or not processed; rows failed
	Duplicates                int // jobs whose handler ended ok more than once
	ByRescue, ByRetry         int // of the duplicates' extra ok calls: the lease was lost (rescued), or the attempt ended in a retry
}

// checkOutcome checks, once everything has drained, that every job of the table is processed (none
// failed, none of the known ids missing: lost = 0), and explains every duplicate from the audit: a
// job whose handler ended ok more than once was processed by exactly one of those attempts
// (CheckAudit checks that the processed one held the token and had ended ok), and each other such
// attempt left the running state without processing the row, either taken back by the rescuer
// (token bumped: its lease was lost) or finished as a retry (its handler returned an error after its
// ledger row said ok). Either way the job ran at least once and was recorded once. ledgerKind is the
// table's kind in the ledger ("" for the keyed kind).
func (e *pgfEnv) checkOutcome(t *testing.T, table, ledgerKind string, known []int64) pgfOutcome {
	t.Helper()
	ctx := context.Background()
	o := pgfOutcome{Known: len(known)}
	if err := e.DB.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE failed_at IS NOT NULL),
		(SELECT count(*) FROM unnest($1::bigint[]) k(id) WHERE NOT EXISTS (SELECT 1 FROM `+table+` t WHERE t.id = k.id AND t.processed_at IS NOT NULL))
		FROM `+table, known).Scan(&o.Rows, &o.Failed, &o.Lost); err != nil {
		t.Fatal(err)
	}
	if o.Lost != 0 || o.Failed != 0 {
		t.Errorf("%s: %d of %d known jobs not processed, %d rows failed; want none", table, o.Lost, o.Known, o.Failed)
	}
	rows, err := e.DB.Query(ctx, `WITH ok AS (SELECT job_id, token FROM mp_ledger WHERE coalesce(kind, '') = $2 AND outcome = 'ok'),
		dup AS (SELECT job_id FROM ok GROUP BY job_id HAVING count(*) > 1)
		SELECT ok.job_id, ok.token, coalesce((SELECT string_agg(a.new_state || CASE WHEN a.new_token > a.old_token THEN ' rescued' ELSE '' END, ',')
			FROM fault_audit a WHERE a.kind = $1 AND a.job_id = ok.job_id AND a.old_token = ok.token
				AND a.old_state = 'running' AND a.new_state <> 'running'), 'never left running')
		FROM ok JOIN dup USING (job_id) ORDER BY ok.job_id, ok.token`, table, ledgerKind)
	if err != nil {
		t.Fatal(err)
	}
	type okCall struct {
		Job, Token int64
		Left       string // how the attempt left running, per the audit
	}
	calls, err := pgx.CollectRows(rows, pgx.RowToStructByPos[okCall])
	if err != nil {
		t.Fatal(err)
	}
	byJob := map[int64][]okCall{}
	for _, c := range calls {
		byJob[c.Job] = append(byJob[c.Job], c)
	}
	report := faultkit.NewFailureLog(t, table+": duplicates explained")
	defer report.Done()
	for job, cs := range byJob {
		o.Duplicates++
		processed := 0
		for _, c := range cs {
			switch c.Left {
			case "processed":
				processed++
			case "waiting rescued", "failed rescued":
				o.ByRescue++
			case "waiting":
				o.ByRetry++
			default:
				report.Errorf("%s: job %d ran ok more than once, and its attempt with token %d left running as %q: not explained", table, job, c.Token, c.Left)
			}
		}
		if processed != 1 {
			report.Errorf("%s: job %d ran ok %d times (%v), %d of them processed the row; want exactly 1", table, job, len(cs), cs, processed)
		}
	}
	return o
}

// checkQuietPlain is CheckQuiet for the plain kind's table: nothing leased once every worker stopped.
func (e *pgfEnv) checkQuietPlain(t *testing.T) {
	t.Helper()
	var n int
	if err := e.DB.QueryRow(context.Background(), `SELECT count(*) FROM `+pgfPlainKind+
		` WHERE lease_expires_at IS NOT NULL OR lease_owner IS NOT NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%s: %d rows still leased after every worker stopped", pgfPlainKind, n)
	}
}

// bringLedgerHome copies the ledger and the handlers' concurrency counts from the witness' cluster
// into the scenario's schema, where the audit is, so that CheckAudit and CheckConc can read them.
func (e *pgfEnv) bringLedgerHome(t *testing.T) {
	t.Helper()
	if e.ledger == e.DB {
		return
	}
	ctx := context.Background()
	for _, tbl := range []string{"mp_ledger", "mp_conc"} {
		rows, err := e.ledger.Query(ctx, "SELECT * FROM "+tbl)
		if err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, f := range rows.FieldDescriptions() {
			cols = append(cols, f.Name)
		}
		vals, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.DB.CopyFrom(ctx, pgx.Identifier{tbl}, cols, pgx.CopyFromRows(vals)); err != nil {
			t.Fatalf("copying %s: %v", tbl, err)
		}
	}
}

// workerStats sums the stats the workers reported when they stopped.
func (e *pgfEnv) workerStats(t *testing.T) dispatcher.Stats {
	t.Helper()
	return faultkit.SumStats(t, e.workers)
}

// logTimeline logs the ok completions of ledgerKind ("" for the keyed kind) per second from from to
// to, relative to from: the shape behind a scenario's figures.
func (e *pgfEnv) logTimeline(t *testing.T, what, ledgerKind string, from, to time.Time) {
	t.Helper()
	var lk any
	if ledgerKind != "" {
		lk = ledgerKind
	}
	rows, err := e.ledger.Query(context.Background(), `SELECT count(l.n) FROM generate_series(0, $3::int - 1) s(i)
		LEFT JOIN mp_ledger l ON l.kind IS NOT DISTINCT FROM $1 AND l.outcome = 'ok'
			AND l.ended_at >= $2::timestamptz + make_interval(secs => s.i) AND l.ended_at < $2::timestamptz + make_interval(secs => s.i + 1)
		GROUP BY s.i ORDER BY s.i`, lk, from, int(to.Sub(from).Seconds()))
	if err != nil {
		t.Fatal(err)
	}
	counts, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s, ok completions per second from %s: %v", what, from.Format("15:04:05.000"), counts)
}

// logSessions logs the private cluster's sessions, to explain jobs that do not move.
func (e *pgfEnv) logSessions(t *testing.T) {
	t.Helper()
	rows, err := e.DB.Query(context.Background(), `SELECT format('pid %s %s %s wait %s/%s xact %s query %s: %s', pid, application_name, state,
		wait_event_type, wait_event, to_char(xact_start, 'HH24:MI:SS.MS'), to_char(query_start, 'HH24:MI:SS.MS'), left(query, 100))
		FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() ORDER BY pid`)
	if err != nil {
		t.Logf("sessions: %v", err)
		return
	}
	sessions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Logf("sessions: %v", err)
		return
	}
	for _, s := range sessions {
		t.Logf("session: %s", s)
	}
}

// pgfRates is the ok completions per second of each kind over a window.
type pgfRates struct{ plain, keyed float64 }

// rates reads the completions per second of both kinds in [from, to) from the ledger.
func (e *pgfEnv) rates(t *testing.T, from, to time.Time) pgfRates {
	t.Helper()
	return pgfRates{plain: faultkit.LedgerRate(t, e.ledger, pgfPlainKind, from, to), keyed: faultkit.LedgerRate(t, e.ledger, "", from, to)}
}

// window lets d pass and returns it with both kinds' completions per second in it.
func (e *pgfEnv) window(t *testing.T, d time.Duration) (from, to time.Time, r pgfRates) {
	t.Helper()
	from = time.Now()
	time.Sleep(d)
	to = time.Now()
	return from, to, e.rates(t, from, to)
}

// recovery is pgfRecovery for both kinds: how long after up each was back at frac of ref (1 s
// windows, looked for within 10 s), and whether both were.
func (e *pgfEnv) recovery(t *testing.T, up time.Time, ref pgfRates, frac float64) (plain, keyed time.Duration, ok bool) {
	t.Helper()
	plain, okPlain := pgfRecovery(t, e.ledger, pgfPlainKind, up, ref.plain, frac, time.Second, 10*time.Second)
	keyed, okKeyed := pgfRecovery(t, e.ledger, "", up, ref.keyed, frac, time.Second, 10*time.Second)
	return plain, keyed, okPlain && okKeyed
}

// pgfVerdict is what the end of a scenario found.
type pgfVerdict struct {
	plain, keyed           pgfOutcome
	auditPlain, auditKeyed faultkit.AuditSummary
	stats                  dispatcher.Stats
	enqueueFailures        int
	drained                time.Duration // from the load's end until every job was finished
}

// figures are the figures every PostgreSQL scenario reports, as ReportFigures pairs.
func (v pgfVerdict) figures() []any {
	return []any{
		"jobs", v.plain.Rows + v.keyed.Rows, "lost", v.plain.Lost + v.keyed.Lost,
		"duplicates", v.plain.Duplicates + v.keyed.Duplicates,
		"dup by rescue", v.plain.ByRescue + v.keyed.ByRescue, "dup by retry", v.plain.ByRetry + v.keyed.ByRetry,
		"rescued", v.stats.Rescued, "retried", v.stats.Retried, "stale finishes", v.stats.StaleFinishes,
		"leases lost", v.stats.LeasesLost, "enqueue calls failed", v.enqueueFailures,
		// rows an enqueue reported as failed although it committed
		"rows enqueued unknown", v.plain.Rows + v.keyed.Rows - v.plain.Known - v.keyed.Known,
		"drained in", v.drained, "audited finishes", v.auditPlain.Completions + v.auditKeyed.Completions,
	}
}

// end ends a scenario: it stops the load, waits until every job has finished, logs the
// completions per second since from, and verifies what happened (see verify).
func (e *pgfEnv) end(t *testing.T, load *pgfLoad, from time.Time) pgfVerdict {
	t.Helper()
	plainIDs, keyedIDs, failures := load.Stop()
	stopped := time.Now()
	drained := e.drain(t, 3*pgfLeaseTTL)
	e.logTimeline(t, "plain", pgfPlainKind, from, stopped.Add(drained))
	e.logTimeline(t, "keyed", "", from, stopped.Add(drained))
	e.checkAlive(t, "once the load had drained")
	v := e.verify(t, plainIDs, keyedIDs)
	v.enqueueFailures, v.drained = failures, drained
	return v
}

// verify checks what a scenario leaves once its load has drained: SIGTERM to every worker (each
// exits 0 within 10 s), nothing left leased or locked, then the audit of both kinds, their outcomes
// (lost = 0, duplicates explained) and the per-key counts (never two handlers of a key, or of a
// plain job, at once).
func (e *pgfEnv) verify(t *testing.T, plainIDs, keyedIDs []int64) pgfVerdict {
	t.Helper()
	var v pgfVerdict
	faultkit.Terminate(t, e.workers...)
	e.CheckQuiet(t)
	e.checkQuietPlain(t)
	e.bringLedgerHome(t)
	// The audit's checks join tens of thousands of rows by job and token, and match the ledger's kind
	// with IS NOT DISTINCT FROM, which no hash join can do: without these indexes (the ledger's is
	// CheckAudit's own) and fresh statistics, the planner's nested loops take minutes.
	for _, stmt := range []string{`CREATE INDEX IF NOT EXISTS mp_ledger_job_token ON mp_ledger (job_id, token)`,
		`CREATE INDEX ON fault_audit (job_id)`,
		`ANALYZE fault_audit, mp_ledger, mp_conc`} {
		if _, err := e.DB.Exec(context.Background(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	v.auditPlain = faultkit.CheckAudit(t, e.DB, pgfPlainKind, pgfPlainKind)
	v.auditKeyed = faultkit.CheckAudit(t, e.DB, faultkit.KeyedKind, "")
	v.plain = e.checkOutcome(t, pgfPlainKind, pgfPlainKind, plainIDs)
	v.keyed = e.checkOutcome(t, faultkit.KeyedKind, "", keyedIDs)
	e.CheckConc(t, nil, 1)
	v.stats = e.workerStats(t)
	return v
}

// pgfDead is the dead tuples of the two kinds' tables (pg_stat_user_tables.n_dead_tup).
type pgfDead struct{ plain, keyed int }

func (d pgfDead) max(o pgfDead) pgfDead {
	return pgfDead{plain: max(d.plain, o.plain), keyed: max(d.keyed, o.keyed)}
}

// deadTuples reads the kinds' tables' dead tuples from the cumulative statistics.
func (e *pgfEnv) deadTuples(t *testing.T) pgfDead {
	t.Helper()
	var d pgfDead
	if err := e.DB.QueryRow(context.Background(), `SELECT
		coalesce(sum(n_dead_tup) FILTER (WHERE relname = $2), 0), coalesce(sum(n_dead_tup) FILTER (WHERE relname = $3), 0)
		FROM pg_stat_user_tables WHERE schemaname = $1`, e.Schema.Name, pgfPlainKind, faultkit.KeyedKind).Scan(&d.plain, &d.keyed); err != nil {
		t.Fatal(err)
	}
	return d
}

// latencyP99 is the 99th percentile, over both kinds, of how long a job processed in [from, to)
// took from its enqueue to its completion.
func (e *pgfEnv) latencyP99(t *testing.T, from, to time.Time) time.Duration {
	t.Helper()
	var secs float64
	if err := e.DB.QueryRow(context.Background(), `SELECT coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY s), 0) FROM (
		SELECT extract(epoch FROM processed_at - created_at) s FROM `+pgfPlainKind+` WHERE processed_at >= $1 AND processed_at < $2
		UNION ALL
		SELECT extract(epoch FROM processed_at - created_at) FROM `+faultkit.KeyedKind+` WHERE processed_at >= $1 AND processed_at < $2) x`,
		from, to).Scan(&secs); err != nil {
		t.Fatal(err)
	}
	return time.Duration(secs * float64(time.Second))
}
