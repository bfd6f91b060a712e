package integration_test

// What the worker fault scenarios (faults_workers_test.go: a worker paused, killed, killed again and
// again, a stalled leader, failing jobs) share: two worker extras (a schedule firing every second, a
// kind whose jobs fail by a rule on their seq), a producer of steady load, a log of every UPDATE
// statement sent to a kind's table (who sent it, what it was, how many rows it changed, also none),
// and the checks that hold when workers die or stall: lost jobs, duplicates each justified by a lease
// taken back, and no two attempts holding a key at once.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// addKindTable creates the table of kind in e's schema.
func addKindTable[T any](t *testing.T, e *faultkit.World, kind *jobinfo.Kind[T]) {
	t.Helper()
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.Exec(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
}

// wfNodes names a scenario's worker processes for PostgreSQL: each connects with application_name
// "<tag>-<node>", the tag random per test, so that the statements a worker sends can be told apart
// from every other test's on the shared server.
type wfNodes struct{ tag string }

func newWFNodes() wfNodes { return wfNodes{tag: fmt.Sprintf("wf%06x", rand.N(1<<24))} }

// app is the application_name of node.
func (n wfNodes) app(node string) string { return n.tag + "-" + node }

// node is the node of an application_name, or "" if it is none of the scenario's workers.
func (n wfNodes) node(app string) string {
	node, ok := strings.CutPrefix(app, n.tag+"-")
	if !ok {
		return ""
	}
	return node
}

// settings are e's worker settings for node, connecting with node's application_name.
func (n wfNodes) settings(t *testing.T, e *faultkit.World, node string) faultkit.WorkerSettings {
	t.Helper()
	s := e.WorkerSettings(node)
	u, err := url.Parse(s.DatabaseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		s.DatabaseURL += " application_name=" + n.app(node)
		return s
	}
	q := u.Query()
	q.Set("application_name", n.app(node))
	// As testenv does: Encode writes a space as "+", which libpq and pgx read as a plus sign.
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	s.DatabaseURL = u.String()
	return s
}

// wfIDs collects the ids of enqueued jobs, safe for concurrent use.
type wfIDs struct {
	mu  sync.Mutex
	ids []int64
}

func (s *wfIDs) add(ids ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, ids...)
}

func (s *wfIDs) all() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids)
}

// wfEnqueue enqueues jobs of kind, retrying while the shared server refuses connections, adds their
// ids to into and returns them.
func wfEnqueue[T any](ctx context.Context, db *pgxpool.Pool, kind *jobinfo.Kind[T], jobs []T, into *wfIDs) ([]int64, error) {
	var ids []int64
	err := faultkit.RetryUnsent(ctx, func() error {
		res, err := dispatcher.EnqueueMany(ctx, db, kind, jobs)
		if err != nil {
			return err
		}
		ids = ids[:0]
		for i, r := range res {
			if r.Err != nil || r.Duplicate {
				return fmt.Errorf("enqueue %+v: %+v", jobs[i], r)
			}
			ids = append(ids, r.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	into.add(ids...)
	return ids, nil
}

// wfSteady offers load at a steady rate: every 20 ms it calls enqueue(ctx, first, n) with the jobs
// due at rate per second since it began (first numbers them from 0 on), catching up after a late
// tick. stop ends it, after the enqueue under way (an enqueue is never cancelled, so that every job
// committed is one recorded), and returns how many jobs it enqueued; a failed enqueue fails t and
// stops it.
func wfSteady(t *testing.T, rate float64, enqueue func(ctx context.Context, first, n int) error) (stop func() int) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan struct{})
	sent := 0
	go func() {
		defer close(done)
		began := time.Now()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			due := int(time.Since(began).Seconds() * rate)
			if due <= sent {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := enqueue(ctx, sent, due-sent)
			cancel()
			if err != nil {
				t.Errorf("steady load: %v", err)
				return
			}
			sent = due
		}
	}()
	var once sync.Once
	stop = func() int {
		once.Do(func() {
			close(quit)
			<-done
		})
		return sent
	}
	t.Cleanup(func() { stop() })
	return stop
}

// wfKeyedLoad returns an enqueue for wfSteady of e's keyed kind over blogs firstBlog to
// firstBlog+blogs-1, seq numbers rising per blog, recorded in ids.
func wfKeyedLoad(e *faultkit.World, firstBlog, blogs int, ids *wfIDs) func(ctx context.Context, first, n int) error {
	return func(ctx context.Context, first, n int) error {
		jobs := make([]faultkit.KeyedJob, n)
		for i := range jobs {
			k := first + i
			jobs[i] = faultkit.KeyedJob{BlogID: int64(firstBlog + k%blogs), Seq: int64(k / blogs)}
		}
		_, err := wfEnqueue(ctx, e.DB, e.Kind, jobs, ids)
		return err
	}
}

// wfPlainBlog is where the plain kinds' blog ids start, far from the keyed kind's, so that mp_conc
// (counted per blog whatever the kind) keeps the keyed kind's counts apart.
const wfPlainBlog = 1_000_000

// wfPlainLoad returns an enqueue for wfSteady of a plain kind, seq(first+i) giving each job's seq,
// recorded in ids.
func wfPlainLoad(e *faultkit.World, kind *jobinfo.Kind[faultkit.PlainJob], seq func(k int) int64, ids *wfIDs) func(ctx context.Context, first, n int) error {
	return func(ctx context.Context, first, n int) error {
		jobs := make([]faultkit.PlainJob, n)
		for i := range jobs {
			s := seq(first + i)
			jobs[i] = faultkit.PlainJob{BlogID: wfPlainBlog + s, Seq: s}
		}
		_, err := wfEnqueue(ctx, e.DB, kind, jobs, ids)
		return err
	}
}

// wfCalls reads the ledger's calls of ledgerKind ("" for the keyed kind) of job id, in start order.
func wfCalls(t *testing.T, db *pgxpool.Pool, ledgerKind string, id int64) []faultkit.Call {
	t.Helper()
	var lk any
	if ledgerKind != "" {
		lk = ledgerKind
	}
	rows, err := db.Query(context.Background(), `SELECT n, job_id, blog_id, seq, attempt, token, slot, pid, node,
		started_at, ended_at, outcome, coalesce(running, 0) FROM mp_ledger
		WHERE kind IS NOT DISTINCT FROM $1 AND job_id = $2 ORDER BY started_at, n`, lk, id)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := pgx.CollectRows(rows, pgx.RowToStructByPos[faultkit.Call])
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

// wfCallCount counts the ledger's calls of ledgerKind of job id.
func wfCallCount(t *testing.T, db *pgxpool.Pool, ledgerKind string, id int64) int {
	t.Helper()
	return wfCount(t, db, `SELECT count(*) FROM mp_ledger WHERE kind IS NOT DISTINCT FROM $1 AND job_id = $2`, wfLedgerKind(ledgerKind), id)
}

// wfLedgerKind is ledgerKind as the ledger's kind column holds it.
func wfLedgerKind(ledgerKind string) any {
	if ledgerKind == "" {
		return nil
	}
	return ledgerKind
}

// wfCount runs a count query.
func wfCount(t *testing.T, db *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// wfWaitProcessed waits until every job of ids in table is processed or failed.
func wfWaitProcessed(t *testing.T, db *pgxpool.Pool, table string, ids []int64, within time.Duration) {
	t.Helper()
	faultkit.WaitFor(t, fmt.Sprintf("the %d jobs of %s to finish", len(ids), table), within, func() bool {
		return wfCount(t, db, `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()+`
			WHERE id = ANY ($1) AND (processed_at IS NOT NULL OR failed_at IS NOT NULL)`, ids) == len(ids)
	})
}

// wfTally checks how the jobs ids of table (ledger kind ledgerKind) ended: lost counts those neither
// processed nor, when failed(id), failed (a job not in the table counts too). duplicates counts the
// jobs whose handler ended "ok" more than once; at-least-once allows that only after a lease was
// lost, so each such call but the one whose attempt completed the row must have had its lease taken
// back by a rescue (the audit shows the row's token moving on while it ran), and t fails otherwise.
func wfTally(t *testing.T, db *pgxpool.Pool, table, ledgerKind string, ids []int64, failed func(id int64) bool) (lost, duplicates int) {
	t.Helper()
	ctx := context.Background()
	wfIndexAudit(t, db)
	rows, err := db.Query(ctx, `SELECT id, processed_at IS NOT NULL, failed_at IS NOT NULL FROM `+pgx.Identifier{table}.Sanitize()+
		` WHERE id = ANY ($1)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	type end struct{ processed, failed bool }
	ends := map[int64]end{}
	var id int64
	var e end
	if _, err := pgx.ForEachRow(rows, []any{&id, &e.processed, &e.failed}, func() error { ends[id] = e; return nil }); err != nil {
		t.Fatal(err)
	}
	report := faultkit.NewFailureLog(t, table+": jobs lost")
	for _, id := range ids {
		e, ok := ends[id]
		wantFailed := failed != nil && failed(id)
		if !ok || (wantFailed && !e.failed) || (!wantFailed && !e.processed) {
			lost++
			report.Errorf("%s job %d: %+v (in the table: %v), want it %s", table, id, e, ok, map[bool]string{true: "failed", false: "processed"}[wantFailed])
		}
	}
	report.Done()

	// Every "ok" call of a job with more than one, and whether its attempt completed the row or lost
	// its lease to a rescue.
	rows, err = db.Query(ctx, `WITH ok AS (
		SELECT l.job_id, l.token, l.node FROM mp_ledger l JOIN unnest($3::bigint[]) AS u(id) ON u.id = l.job_id
		WHERE l.kind IS NOT DISTINCT FROM $2 AND l.outcome = 'ok'),
	dup AS (SELECT job_id FROM ok GROUP BY job_id HAVING count(*) > 1)
	SELECT o.job_id, o.token, o.node,
		EXISTS (SELECT 1 FROM fault_audit a WHERE a.kind = $1 AND a.job_id = o.job_id AND a.old_token = o.token
			AND a.old_state = 'running' AND a.new_state = 'processed' AND a.new_token = a.old_token),
		EXISTS (SELECT 1 FROM fault_audit a WHERE a.kind = $1 AND a.job_id = o.job_id AND a.old_token = o.token
			AND a.old_state = 'running' AND a.new_token > a.old_token)
	FROM ok o JOIN dup USING (job_id) ORDER BY o.job_id, o.token`, table, wfLedgerKind(ledgerKind), ids)
	if err != nil {
		t.Fatal(err)
	}
	type okCall struct {
		job, token         int64
		node               string
		completed, rescued bool
	}
	calls, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (okCall, error) {
		var c okCall
		return c, r.Scan(&c.job, &c.token, &c.node, &c.completed, &c.rescued)
	})
	if err != nil {
		t.Fatal(err)
	}
	byJob := map[int64][]okCall{}
	for _, c := range calls {
		byJob[c.job] = append(byJob[c.job], c)
	}
	unjustified := faultkit.NewFailureLog(t, table+": duplicates without a lost lease")
	for job, cs := range byJob {
		completed := 0
		for _, c := range cs {
			switch {
			case c.completed:
				completed++
			case !c.rescued:
				unjustified.Errorf("%s job %d ran to ok %d times: the call of token %d (in %s) neither completed the row nor lost its lease to a rescue",
					table, job, len(cs), c.token, c.node)
			}
		}
		if completed != 1 {
			unjustified.Errorf("%s job %d ran to ok %d times, %d of them completed the row; want exactly 1", table, job, len(cs), completed)
		}
	}
	unjustified.Done()
	return lost, len(byJob)
}

// wfCheckKeyOverlap checks from the ledger that no more than limit attempts of the keyed kind's jobs
// of one blog held the key at once, and returns the most that did. An attempt holds its key from its
// handler's start until the handler ended or the attempt's lease was taken back by a rescue (the
// audit's change of its token), whichever came first: a killed worker's handler never ends, and a
// paused one's ends only once it wakes, after its job ran again elsewhere. mp_conc cannot tell
// either apart, and counts them as running on. An attempt that neither ended nor was rescued counts
// as holding its key to the end.
func wfCheckKeyOverlap(t *testing.T, db *pgxpool.Pool, limit int) int {
	t.Helper()
	wfIndexAudit(t, db)
	rows, err := db.Query(context.Background(), `WITH l AS (
		SELECT l.n, l.job_id, l.blog_id, l.token, l.node, l.started_at,
			least(coalesce(l.ended_at, 'infinity'), coalesce((SELECT min(a.at) FROM fault_audit a WHERE a.kind = $1 AND a.job_id = l.job_id
				AND a.old_token = l.token AND a.old_state = 'running' AND a.new_token > a.old_token), 'infinity')) AS held_to
		FROM mp_ledger l WHERE l.kind IS NULL)
	SELECT b.blog_id, b.job_id, b.node, b.started_at, 1 + count(o.n) AS holding, array_agg(o.job_id || ' in ' || o.node) FILTER (WHERE o.n IS NOT NULL)
	FROM l b LEFT JOIN l o ON o.blog_id = b.blog_id AND o.n <> b.n AND o.started_at <= b.started_at AND o.held_to > b.started_at
	GROUP BY b.n, b.blog_id, b.job_id, b.node, b.started_at
	ORDER BY holding DESC, b.started_at LIMIT 10`, faultkit.KeyedKind)
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	var blog, job int64
	var node string
	var at time.Time
	var holding int
	var others []string
	if _, err := pgx.ForEachRow(rows, []any{&blog, &job, &node, &at, &holding, &others}, func() error {
		most = max(most, holding)
		if holding > limit {
			t.Errorf("blog %d: job %d started in %s at %s while %v held the key: %d at once, want at most %d",
				blog, job, node, at.Format("15:04:05.000000"), others, holding, limit)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return most
}

// wfIndexAudit indexes the audit and the ledger for the checks here, which look both up per job: built
// once the run is over, they cost the run nothing.
func wfIndexAudit(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	for _, stmt := range []string{
		`CREATE INDEX IF NOT EXISTS wf_fault_audit_job ON fault_audit (kind, job_id, old_token)`,
		`CREATE INDEX IF NOT EXISTS mp_ledger_job_token ON mp_ledger (job_id, token)`,
	} {
		if _, err := db.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("indexing the audit: %v", err)
		}
	}
}

// wfLatency is the median and 99th percentile of the time from enqueue to completion of table's jobs
// created in [from, to) and processed.
func wfLatency(t *testing.T, db *pgxpool.Pool, table string, from, to time.Time) (p50, p99 time.Duration) {
	t.Helper()
	var a, b *float64
	if err := db.QueryRow(context.Background(), `SELECT
		percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM processed_at - created_at)),
		percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM processed_at - created_at))
		FROM `+pgx.Identifier{table}.Sanitize()+` WHERE created_at >= $1 AND created_at < $2 AND processed_at IS NOT NULL`, from, to).Scan(&a, &b); err != nil {
		t.Fatal(err)
	}
	d := func(s *float64) time.Duration {
		if s == nil {
			return 0
		}
		return time.Duration(*s * float64(time.Second))
	}
	return d(a), d(b)
}

// wfWindow is a stretch of a scenario on the database's clock.
type wfWindow struct{ from, to time.Time }

// rate is LedgerRate over w of each ledger kind, summed.
func (w wfWindow) rate(t *testing.T, db *pgxpool.Pool, ledgerKinds ...string) float64 {
	t.Helper()
	sum := 0.0
	for _, k := range ledgerKinds {
		sum += faultkit.LedgerRate(t, db, k, w.from, w.to)
	}
	return sum
}

// wfMeasure waits d and returns the window it lasted.
func wfMeasure(t *testing.T, e *faultkit.World, d time.Duration) wfWindow {
	t.Helper()
	from := e.Now(t)
	time.Sleep(d)
	return wfWindow{from: from, to: e.Now(t)}
}

// wfWritesSQL logs every UPDATE statement of a table, also those that change no row: when, which
// session sent it (application_name), what it was (from its text: a claim, a heartbeat's lease
// extension, a finish, a rescue) and how many rows it changed. The function is created in the test's
// schema, as InstallAudit's is.
const wfWritesSQL = `CREATE TABLE IF NOT EXISTS {schema}.wf_writes (
	n bigserial PRIMARY KEY,
	tbl text NOT NULL,
	app text NOT NULL,
	stmt text NOT NULL,
	rows int NOT NULL,
	at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE OR REPLACE FUNCTION {schema}.wf_log_writes() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	q text := current_query();
BEGIN
	INSERT INTO {schema}.wf_writes (tbl, app, stmt, rows) SELECT TG_TABLE_NAME, current_setting('application_name'),
		CASE WHEN q LIKE '%AS u(id, token, outcome, err, delay%' THEN 'finish'
			WHEN q LIKE '%WITH expired AS%' THEN 'rescue'
			WHEN q LIKE '%attempts_made = t.attempts_made + 1%' THEN 'claim'
			WHEN q LIKE '%SET lease_expires_at = now() + make_interval(secs => $3)%WHERE t.id = $1 AND t.lock_token = $2%' THEN 'heartbeat'
			ELSE 'other' END,
		(SELECT count(*) FROM changed);
	RETURN NULL;
END $$;
CREATE TRIGGER wf_log_writes AFTER UPDATE ON {table} REFERENCING NEW TABLE AS changed
	FOR EACH STATEMENT EXECUTE FUNCTION {schema}.wf_log_writes()`

// installWriteLog logs every UPDATE statement of table (see wfWritesSQL).
func installWriteLog(t *testing.T, db *pgxpool.Pool, schema, table string) {
	t.Helper()
	sql := strings.NewReplacer("{schema}", pgx.Identifier{schema}.Sanitize(), "{table}", pgx.Identifier{schema, table}.Sanitize()).Replace(wfWritesSQL)
	if _, err := db.Exec(context.Background(), sql); err != nil {
		t.Fatalf("installing the write log of %s: %v", table, err)
	}
}

// wfWrite is one logged UPDATE statement.
type wfWrite struct {
	Stmt string
	Rows int
	At   time.Time
}

// wfWritesOf returns the statements app sent to table at or after from, of the kinds stmts (all if
// none given), in order.
func wfWritesOf(t *testing.T, db *pgxpool.Pool, table, app string, from time.Time, stmts ...string) []wfWrite {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT stmt, rows, at FROM wf_writes
		WHERE tbl = $1 AND app = $2 AND at >= $3 AND (cardinality($4::text[]) = 0 OR stmt = ANY ($4)) ORDER BY n`, table, app, from, stmts)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pgx.CollectRows(rows, pgx.RowToStructByPos[wfWrite])
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// wfRowsChanged sums the rows the writes changed.
func wfRowsChanged(ws []wfWrite) int {
	n := 0
	for _, w := range ws {
		n += w.Rows
	}
	return n
}

// wfPause stops w's process (SIGSTOP): its every goroutine, timer and connection freezes as in a
// long GC pause or a suspended VM, while the kernel keeps its sockets open. resume continues it.
func wfPause(t *testing.T, w *faultkit.Worker) (resume func()) {
	t.Helper()
	if err := syscall.Kill(w.Pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %s: %v", w, err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			if err := syscall.Kill(w.Pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
				t.Errorf("SIGCONT %s: %v", w, err)
			}
		})
	}
	// A failing scenario must not leave it stopped: the cleanup that kills it runs after this one.
	t.Cleanup(resume)
	return resume
}

// wfAlive fails t for each worker whose process has exited.
func wfAlive(t *testing.T, what string, workers ...*faultkit.Worker) {
	t.Helper()
	for _, w := range workers {
		if state, exited := w.Exited(); exited {
			t.Errorf("%s: worker %s exited (%v)", what, w, state)
		}
	}
}

// wfRescues counts the audit's rescues of kind's rows: a running row's token taken back.
func wfRescues(t *testing.T, db *pgxpool.Pool, kind, where string, args ...any) int {
	t.Helper()
	return wfCount(t, db, `SELECT count(*) FROM fault_audit WHERE kind = $1 AND old_state = 'running' AND new_token > old_token`+where,
		append([]any{kind}, args...)...)
}

// wfSince is how long after from the time at was, 0 if there is none.
func wfSince(at *time.Time, from time.Time) time.Duration {
	if at == nil {
		return 0
	}
	return at.Sub(from)
}

// wfUntil waits until the database's clock reaches at.
func wfUntil(t *testing.T, e *faultkit.World, at time.Time) {
	t.Helper()
	if d := at.Sub(e.Now(t)); d > 0 {
		time.Sleep(d)
	}
}

// wfStr is *s, or "<nil>".
func wfStr(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// wfLeaderSQL logs, for the leader scenario, every change of a maintenance lease's holder
// (jobpipe_leaders: rescue:KIND, prune:KIND, schedule:NAME) and every schedule firing with the session
// that fired it; and lets the test stop a chosen session inside a schedule round: the first job that
// session enqueues for the tick kind (TICK) after a row for it appears in wf_hold waits, in its
// round's transaction, for the advisory lock the row names.
const wfLeaderSQL = `CREATE TABLE {schema}.wf_leaders (
	n bigserial PRIMARY KEY, name text NOT NULL, holder text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION {schema}.wf_log_leader() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' OR OLD.holder IS DISTINCT FROM NEW.holder THEN
		INSERT INTO {schema}.wf_leaders (name, holder) VALUES (NEW.name, NEW.holder);
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER wf_log_leader AFTER INSERT OR UPDATE ON {schema}.jobpipe_leaders FOR EACH ROW EXECUTE FUNCTION {schema}.wf_log_leader();

CREATE TABLE {schema}.wf_firings (
	instant timestamptz NOT NULL, job_id bigint NOT NULL, app text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION {schema}.wf_log_firing() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO {schema}.wf_firings (instant, job_id, app) VALUES (NEW.instant, NEW.job_id, current_setting('application_name'));
	RETURN NULL;
END $$;
CREATE TRIGGER wf_log_firing AFTER INSERT ON {schema}.jobpipe_schedule_firings FOR EACH ROW EXECUTE FUNCTION {schema}.wf_log_firing();

CREATE TABLE {schema}.wf_hold (app text PRIMARY KEY, lock bigint NOT NULL);
CREATE FUNCTION {schema}.wf_hold_round() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	k bigint;
BEGIN
	DELETE FROM {schema}.wf_hold WHERE app = current_setting('application_name') RETURNING lock INTO k;
	IF k IS NOT NULL THEN
		PERFORM pg_advisory_xact_lock_shared(k);
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER wf_hold_round BEFORE INSERT ON {tick} FOR EACH ROW EXECUTE FUNCTION {schema}.wf_hold_round()`

// installLeaderLog installs wfLeaderSQL in e's schema, for the tick kind tick.
func installLeaderLog(t *testing.T, e *faultkit.World, tick string) {
	t.Helper()
	sql := strings.NewReplacer("{schema}", pgx.Identifier{e.Schema.Name}.Sanitize(),
		"{tick}", pgx.Identifier{e.Schema.Name, tick}.Sanitize()).Replace(wfLeaderSQL)
	if _, err := e.DB.Exec(context.Background(), sql); err != nil {
		t.Fatalf("installing the leader log: %v", err)
	}
}

// wfStopInRound stops w (SIGSTOP) inside a round of the tick schedule, which it must lead: its round
// has enqueued the instant's job and holds the schedule's row when the process stops, and the server
// then waits for the round's next statement. It returns when w stopped (the database's clock) and
// how to resume it.
func wfStopInRound(t *testing.T, e *faultkit.World, w *faultkit.Worker, app string) (stoppedAt time.Time, resume func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := e.DB.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	key := rand.Int64()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
				t.Errorf("advisory unlock: %v", err)
			}
		}
	}
	defer unlock()
	if _, err := e.DB.Exec(ctx, `INSERT INTO wf_hold (app, lock) VALUES ($1, $2)`, app, key); err != nil {
		t.Fatal(err)
	}
	faultkit.WaitFor(t, w.Name+"'s next schedule round to enqueue its job", 30*time.Second, func() bool {
		return wfCount(t, e.DB, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1
			AND wait_event_type = 'Lock' AND wait_event = 'advisory'`, app) == 1
	})
	resume = wfPause(t, w)
	stoppedAt = e.Now(t)
	unlock() // the job is enqueued: the round waits on its stopped client
	return stoppedAt, resume
}

// wfLeases returns each lease's holder now.
func wfLeases(t *testing.T, db *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT name, holder FROM jobpipe_leaders WHERE expires_at > now()`)
	if err != nil {
		t.Fatal(err)
	}
	leases := map[string]string{}
	var name, holder string
	if _, err := pgx.ForEachRow(rows, []any{&name, &holder}, func() error { leases[name] = holder; return nil }); err != nil {
		t.Fatal(err)
	}
	return leases
}

// wfTimeline logs, every period until stopped, each ledger kind's completions per second, its table's
// backlog (jobs neither processed nor failed), and the state of the whole server: its client backends,
// how many are active, the transactions older than 5 s (another test's long transaction holds back
// the cleanup of every table, and slows claims) and the round trip of the timeline's own query. It is
// what a throughput figure needs to be read against on a shared machine: a dip that the server's
// round trip shows before the fault is another test's, not the fault's. It also logs the machine's
// CPU pressure (see wfCPUPressure).
func wfTimeline(t *testing.T, e *faultkit.World, period time.Duration, tables map[string]string) (stop func()) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		ctx := context.Background()
		last := time.Now()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			var now time.Time
			var long, active, backends int
			sent := time.Now()
			if err := e.DB.QueryRow(ctx, `SELECT clock_timestamp(), count(*) FILTER (WHERE xact_start < now() - interval '5 seconds'),
				count(*) FILTER (WHERE state = 'active'), count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'`).
				Scan(&now, &long, &active, &backends); err != nil {
				continue
			}
			probe := time.Since(sent)
			var parts []string
			for _, table := range slices.Sorted(maps.Keys(tables)) {
				var ok, backlog int
				if err := e.DB.QueryRow(ctx, `SELECT (SELECT count(*) FROM mp_ledger WHERE kind IS NOT DISTINCT FROM $1 AND outcome = 'ok'
					AND ended_at >= $2 AND ended_at < $3), (SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()+`
					WHERE processed_at IS NULL AND failed_at IS NULL)`, wfLedgerKind(tables[table]), now.Add(-period), now).Scan(&ok, &backlog); err != nil {
					continue
				}
				parts = append(parts, fmt.Sprintf("%s %.0f/s backlog %d", table, float64(ok)/period.Seconds(), backlog))
			}
			t.Logf("timeline %s: %s; server: %d client backends, %d active, %d transactions older than 5 s, a query's round trip %v; machine: %s (sampled %v late)",
				now.Format("15:04:05"), strings.Join(parts, ", "), backends, active, long, probe.Round(time.Millisecond), wfCPUPressure(),
				(time.Since(last) - period).Round(time.Millisecond))
			last = time.Now()
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(quit); <-done }) }
	t.Cleanup(stop)
	return stop
}

// wfLeasedBy counts the leased rows of tables by their lease owner.
func wfLeasedBy(t *testing.T, db *pgxpool.Pool, tables ...string) map[string]int {
	t.Helper()
	held := map[string]int{}
	for _, table := range tables {
		rows, err := db.Query(context.Background(), `SELECT lease_owner, count(*) FROM `+pgx.Identifier{table}.Sanitize()+`
			WHERE lease_owner IS NOT NULL GROUP BY lease_owner`)
		if err != nil {
			t.Fatal(err)
		}
		var owner string
		var n int
		if _, err := pgx.ForEachRow(rows, []any{&owner, &n}, func() error { held[owner] += n; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return held
}

// wfCPUPressure reads the share of the last 10 s in which tasks of the machine waited for a CPU (Linux
// PSI, /proc/pressure/cpu "some avg10"): near 100, the workers got only part of the time they asked
// for, whatever the fault did.
func wfCPUPressure() string {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return "CPU pressure unknown"
	}
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, "avg10="); ok {
			return "CPU pressure " + v + "%"
		}
	}
	return "CPU pressure unknown"
}
