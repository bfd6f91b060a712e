package faultkit

// The world of the PostgreSQL scenarios: a private PostgreSQL cluster that the test may stop, restart
// and whose backends it may terminate (never the shared server), worker processes working a keyed
// and a plain kind on it, and what is measured of them.

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/internal/pgproc"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// Names of the PostgreSQL scenarios' plain kind and of their connections on the private cluster,
// and their workers' lease and backoff.
const (
	PostgresPlainKind = "pgf_plain"
	WorkerApp         = "jobpipe-fault-worker" // the workers' dispatchers (pool and LISTEN connection)
	ledgerApp         = "jobpipe-fault-ledger" // the workers' ledger pools
	keyedBlogs        = 40                     // keys of the keyed kind's load: blog ids 1 to 40
	// postgresPlainBlogBase starts the plain jobs' blog ids (one per job), apart from the keyed kind's, so
	// that mp_conc counts each plain job alone: CheckConc then also shows that no job ran twice at once.
	postgresPlainBlogBase = 1_000_000
	postgresLeaseTTL      = 6 * time.Second // the workers' lease unless PostgresOptions.LeaseTTL says otherwise
	postgresRetryDelay    = 200 * time.Millisecond
)

// PostgresWorld is a PostgreSQL scenario's world: the private cluster, the World in a schema on it (keyed
// kind, ledger tables), the plain kind, both audited, and the worker processes.
type PostgresWorld struct {
	*World
	PG       *pgproc.Cluster
	Plain    *jobinfo.Kind[PlainJob]
	LedgerDB *pgxpool.Pool // where the workers write the ledger: World.DB, or a schema on a second private cluster
	Workers  []*Worker

	opts      PostgresOptions
	ledgerURL string // the workers' JPW_LEDGER_URL
}

// PostgresOptions choose a scenario's setup.
type PostgresOptions struct {
	Settings        map[string]string     // the private cluster's extra settings
	LedgerElsewhere bool                  // the ledger on a second private cluster, which the faults do not touch
	Workers         int                   // workers NewPostgresWorld starts and waits for
	Later           int                   // more workers the scenario starts itself (StartWorker), reserved with the others
	Concurrency     int                   // each worker's Concurrency
	LeaseTTL        time.Duration         // the workers' LeaseTTL; 0: postgresLeaseTTL
	Tune            func(*WorkerSettings) // adjusts every worker's settings; nil: none
}

// NewPostgresWorld starts the private cluster, a Redis node, the schema and kinds, and the worker processes
// (working both kinds, their dispatchers' connections named WorkerApp), and waits until they are
// ready.
func NewPostgresWorld(t *testing.T, o PostgresOptions) *PostgresWorld {
	t.Helper()
	Reserve(t, o.Workers+o.Later)
	pg := testenv.StartPostgres(t, o.Settings)
	nodes := testenv.StartRedisNodes(t, 1)
	addrs, clients := NodeAddrs(nodes)
	e := &PostgresWorld{PG: pg, World: NewWorldIn(t, testenv.NewSchemaOn(t, pg.URL), postgresRetryDelay, addrs, clients, "jpf:"), opts: o}
	e.Plain = e.AddPlainKind(t, PostgresPlainKind, postgresRetryDelay)
	InstallAudit(t, e.DB, e.Schema.Name, KeyedKind)
	InstallAudit(t, e.DB, e.Schema.Name, PostgresPlainKind)
	ledgerURL := withParam(t, e.Schema.URL, "application_name", ledgerApp)
	e.LedgerDB = e.DB
	if o.LedgerElsewhere {
		l := testenv.NewSchemaOn(t, testenv.StartPostgres(t, nil).URL)
		for _, stmt := range []string{ledgerDDL, releaseDDL, concDDL} {
			if _, err := l.Pool.Exec(context.Background(), stmt); err != nil {
				t.Fatal(err)
			}
		}
		ledgerURL, e.LedgerDB = l.URL, l.Pool
	}
	e.ledgerURL = ledgerURL
	for i := range o.Workers {
		e.Workers = append(e.Workers, e.StartWorker(t, fmt.Sprintf("pgw%d", i)))
	}
	WaitReady(t, 60*time.Second, e.Workers...)
	return e
}

// StartWorker starts a worker process named node, working both kinds with the scenario's settings
// and then tune's, without waiting until it is ready.
func (e *PostgresWorld) StartWorker(t *testing.T, node string, tune ...func(*WorkerSettings)) *Worker {
	t.Helper()
	s := e.WorkerSettings(node)
	s.DatabaseURL = withParam(t, e.Schema.URL, "application_name", WorkerApp)
	s.SleepMin, s.SleepMax = time.Millisecond, 3*time.Millisecond
	s.LeaseTTL, s.RescueInterval, s.RetryDelay, s.Concurrency = cmp.Or(e.opts.LeaseTTL, postgresLeaseTTL), time.Second, postgresRetryDelay, e.opts.Concurrency
	s.PlainKind, s.LedgerURL = PostgresPlainKind, e.ledgerURL
	if e.opts.Tune != nil {
		e.opts.Tune(&s)
	}
	for _, f := range tune {
		f(&s)
	}
	return StartWorker(t, s)
}

// withParam returns the connection URL u with the query parameter key set to value.
func withParam(t *testing.T, u, key, value string) string {
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

// CheckAlive fails t for every worker process that has exited: a fault must never end one.
func (e *PostgresWorld) CheckAlive(t *testing.T, when string) {
	t.Helper()
	for _, w := range e.Workers {
		if state, exited := w.Exited(); exited {
			t.Errorf("%s: worker %s exited (%v)", when, w, state)
		}
	}
}

// Outage stops the private cluster (fast mode), runs during (if not nil) while it is down, starts it
// again once d has passed since the stop began, and returns when the stop began and when the server
// accepted connections again.
func (e *PostgresWorld) Outage(t *testing.T, d time.Duration, during func()) (down, up time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	down = time.Now()
	if err := e.PG.Stop(ctx, pgproc.Fast); err != nil {
		t.Fatalf("stopping the server: %v", err)
	}
	if during != nil {
		during()
	}
	time.Sleep(time.Until(down.Add(d)))
	if err := e.PG.Restart(ctx, pgproc.Fast); err != nil {
		t.Fatalf("starting the server again: %v", err)
	}
	up = time.Now()
	t.Logf("server down at %s, accepting connections at %s", down.Format("15:04:05.000"), up.Format("15:04:05.000"))
	return down, up
}

// okEnds returns when the handler calls of ledgerKind ("" for the keyed kind) that ended ok in
// [from, to) ended, in order.
func okEnds(t *testing.T, db *pgxpool.Pool, ledgerKind string, from, to time.Time) []time.Time {
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

// timeBackAt is how long after up the completions of ledgerKind ("" for the keyed kind) were back
// at frac of ref (jobs per second): the end of the first window of w, starting at or after up, in
// which that many ended ok. ok is false when none did within limit.
func timeBackAt(t *testing.T, db *pgxpool.Pool, ledgerKind string, up time.Time, ref, frac float64, w, limit time.Duration) (time.Duration, bool) {
	t.Helper()
	ends := okEnds(t, db, ledgerKind, up, up.Add(limit))
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

// LongestStall is the longest time in [from, to) in which no job of ledgerKind ("" for the keyed
// kind) ended ok: under a steady offered load, how long the workers stood still at worst.
func (e *PostgresWorld) LongestStall(t *testing.T, ledgerKind string, from, to time.Time) time.Duration {
	t.Helper()
	last, longest := from, time.Duration(0)
	for _, end := range append(okEnds(t, e.LedgerDB, ledgerKind, from, to), to) {
		longest = max(longest, end.Sub(last))
		last = end
	}
	return longest
}

// Drain waits until every row of both kinds' tables is processed or failed and returns how
// long that took; it fails t when some are still waiting or running after within.
func (e *PostgresWorld) Drain(t *testing.T, within time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	var open map[string]int
	for {
		open = map[string]int{}
		for _, tbl := range []string{KeyedKind, PostgresPlainKind} {
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
			e.LogSessions(t)
			t.Fatalf("%v after the load stopped, jobs are still open: %v", within, open)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// CheckQuietPlain is CheckQuiet for the plain kind's table: nothing leased once every worker stopped.
func (e *PostgresWorld) CheckQuietPlain(t *testing.T) {
	t.Helper()
	var n int
	if err := e.DB.QueryRow(context.Background(), `SELECT count(*) FROM `+PostgresPlainKind+
		` WHERE lease_expires_at IS NOT NULL OR lease_owner IS NOT NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%s: %d rows still leased after every worker stopped", PostgresPlainKind, n)
	}
}

// BringLedgerHome copies the ledger and the handlers' concurrency counts from the witness' cluster
// into the scenario's schema, where the audit is, so that CheckAudit and CheckConc can read them.
func (e *PostgresWorld) BringLedgerHome(t *testing.T) {
	t.Helper()
	if e.LedgerDB == e.DB {
		return
	}
	ctx := context.Background()
	for _, tbl := range []string{"mp_ledger", "mp_conc"} {
		rows, err := e.LedgerDB.Query(ctx, "SELECT * FROM "+tbl)
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

// WorkerStats sums the stats the workers reported when they stopped.
func (e *PostgresWorld) WorkerStats(t *testing.T) dispatcher.Stats {
	t.Helper()
	return SumStats(t, e.Workers)
}

// LogTimeline logs the ok completions of ledgerKind ("" for the keyed kind) per second from from to
// to, relative to from: the shape behind a scenario's figures.
func (e *PostgresWorld) LogTimeline(t *testing.T, what, ledgerKind string, from, to time.Time) {
	t.Helper()
	var lk any
	if ledgerKind != "" {
		lk = ledgerKind
	}
	rows, err := e.LedgerDB.Query(context.Background(), `SELECT count(l.n) FROM generate_series(0, $3::int - 1) s(i)
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

// LogSessions logs the private cluster's sessions, to explain jobs that do not move.
func (e *PostgresWorld) LogSessions(t *testing.T) {
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

// KindRates is the ok completions per second of each kind over a window.
type KindRates struct{ Plain, Keyed float64 }

// Rates reads the completions per second of both kinds in [from, to) from the ledger.
func (e *PostgresWorld) Rates(t *testing.T, from, to time.Time) KindRates {
	t.Helper()
	return KindRates{Plain: LedgerRate(t, e.LedgerDB, PostgresPlainKind, from, to), Keyed: LedgerRate(t, e.LedgerDB, "", from, to)}
}

// MeasureRates lets d pass and returns it with both kinds' completions per second in it.
func (e *PostgresWorld) MeasureRates(t *testing.T, d time.Duration) (from, to time.Time, r KindRates) {
	t.Helper()
	from = time.Now()
	time.Sleep(d)
	to = time.Now()
	return from, to, e.Rates(t, from, to)
}

// Recovery is timeBackAt for both kinds: how long after up each was back at frac of ref (1 s
// windows, looked for within 10 s), and whether both were.
func (e *PostgresWorld) Recovery(t *testing.T, up time.Time, ref KindRates, frac float64) (plain, keyed time.Duration, ok bool) {
	t.Helper()
	plain, okPlain := timeBackAt(t, e.LedgerDB, PostgresPlainKind, up, ref.Plain, frac, time.Second, 10*time.Second)
	keyed, okKeyed := timeBackAt(t, e.LedgerDB, "", up, ref.Keyed, frac, time.Second, 10*time.Second)
	return plain, keyed, okPlain && okKeyed
}

// DeadTuples is the dead tuples of the two kinds' tables (pg_stat_user_tables.n_dead_tup).
type DeadTuples struct{ Plain, Keyed int }

// Max is the larger of d and o, table by table.
func (d DeadTuples) Max(o DeadTuples) DeadTuples {
	return DeadTuples{Plain: max(d.Plain, o.Plain), Keyed: max(d.Keyed, o.Keyed)}
}

// DeadTuples reads the kinds' tables' dead tuples from the cumulative statistics.
func (e *PostgresWorld) DeadTuples(t *testing.T) DeadTuples {
	t.Helper()
	var d DeadTuples
	if err := e.DB.QueryRow(context.Background(), `SELECT
		coalesce(sum(n_dead_tup) FILTER (WHERE relname = $2), 0), coalesce(sum(n_dead_tup) FILTER (WHERE relname = $3), 0)
		FROM pg_stat_user_tables WHERE schemaname = $1`, e.Schema.Name, PostgresPlainKind, KeyedKind).Scan(&d.Plain, &d.Keyed); err != nil {
		t.Fatal(err)
	}
	return d
}

// LatencyP99 is the 99th percentile, over both kinds, of how long a job processed in [from, to)
// took from its enqueue to its completion.
func (e *PostgresWorld) LatencyP99(t *testing.T, from, to time.Time) time.Duration {
	t.Helper()
	var secs float64
	if err := e.DB.QueryRow(context.Background(), `SELECT coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY s), 0) FROM (
		SELECT extract(epoch FROM processed_at - created_at) s FROM `+PostgresPlainKind+` WHERE processed_at >= $1 AND processed_at < $2
		UNION ALL
		SELECT extract(epoch FROM processed_at - created_at) FROM `+KeyedKind+` WHERE processed_at >= $1 AND processed_at < $2) x`,
		from, to).Scan(&secs); err != nil {
		t.Fatal(err)
	}
	return time.Duration(secs * float64(time.Second))
}
