package faultkit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

// KeyedKind is the kind (and table) of the multi-process tests; each test has its own schema.
const KeyedKind = "mp_post_sync"

// World is what a multi-process test works with: its schema (migrated, with the kind's table and the
// ledger), the kind, and the lock nodes.
type World struct {
	Schema *testenv.Schema
	DB     *pgxpool.Pool
	Kind   *jobinfo.Kind[KeyedJob]
	Addrs  []string
	Nodes  []*redis.Client // the test's own clients of the lock nodes
	Prefix string
}

// NewWorld gives t a schema with jobpipe's tables, the kind's table and the ledger.
func NewWorld(t *testing.T, retryDelay time.Duration, addrs []string, nodes []*redis.Client, prefix string) *World {
	t.Helper()
	return NewWorldIn(t, testenv.NewSchema(t), retryDelay, addrs, nodes, prefix)
}

// NewWorldIn is NewWorld in the schema s, on whichever server it lives (see testenv.NewSchemaOn).
func NewWorldIn(t *testing.T, s *testenv.Schema, retryDelay time.Duration, addrs []string, nodes []*redis.Client, prefix string) *World {
	t.Helper()
	ctx := context.Background()
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	kind, err := defineKeyedKind(KeyedKind, retryDelay, 0)
	if err != nil {
		t.Fatal(err)
	}
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{ddl, ledgerDDL, releaseDDL, concDDL} {
		if _, err := s.Pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	return &World{Schema: s, DB: s.Pool, Kind: kind, Addrs: addrs, Nodes: nodes, Prefix: prefix}
}

// WorkerSettings returns the settings of a worker of e named node; the caller adjusts the rest.
func (e *World) WorkerSettings(node string) WorkerSettings {
	return WorkerSettings{DatabaseURL: e.Schema.URL, RedisAddrs: e.Addrs, RedisPrefix: e.Prefix,
		Kind: KeyedKind, Node: node}
}

// Call is one ledger row: one handler call.
type Call struct {
	N             int64
	JobID, BlogID int64
	Seq           int64
	Attempt       int
	Token         int64
	Slot          int
	Pid           int
	Node          string
	StartedAt     time.Time
	EndedAt       *time.Time
	Outcome       *string
	Running       int // handlers of the blog running right after this one started, itself included
}

// Ledger reads the ledger in the order the handlers started.
func (e *World) Ledger(t *testing.T) []Call {
	t.Helper()
	rows, err := e.DB.Query(context.Background(), `SELECT n, job_id, blog_id, seq, attempt, token, slot, pid, node,
		started_at, ended_at, outcome, coalesce(running, 0) FROM mp_ledger ORDER BY started_at, n`)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Call, error) {
		var m Call
		err := r.Scan(&m.N, &m.JobID, &m.BlogID, &m.Seq, &m.Attempt, &m.Token, &m.Slot, &m.Pid, &m.Node,
			&m.StartedAt, &m.EndedAt, &m.Outcome, &m.Running)
		return m, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// CallsOf returns the ledger rows of one job, in start order.
func (e *World) CallsOf(t *testing.T, id int64) []Call {
	t.Helper()
	var out []Call
	for _, m := range e.Ledger(t) {
		if m.JobID == id {
			out = append(out, m)
		}
	}
	return out
}

// Row is a job's row as the tests check it.
type Row struct {
	Attempts       int
	Token          int64
	StartedAt      *time.Time
	LeaseExpiresAt *time.Time
	LeaseOwner     *string
	LockSlot       *int
	Processed      bool
	Failed         bool
	LastError      *string
}

// Row reads job id's row of the keyed kind.
func (e *World) Row(t *testing.T, id int64) Row {
	t.Helper()
	var r Row
	err := e.DB.QueryRow(context.Background(), `SELECT attempts_made, lock_token, started_at, lease_expires_at, lease_owner,
		lock_slot, processed_at IS NOT NULL, failed_at IS NOT NULL, last_error FROM `+KeyedKind+` WHERE id = $1`, id).
		Scan(&r.Attempts, &r.Token, &r.StartedAt, &r.LeaseExpiresAt, &r.LeaseOwner, &r.LockSlot, &r.Processed, &r.Failed, &r.LastError)
	if err != nil {
		t.Fatalf("job %d: %v", id, err)
	}
	return r
}

// Count counts the kind's rows matching cond.
func (e *World) Count(t *testing.T, cond string) int {
	t.Helper()
	var n int
	if err := e.DB.QueryRow(context.Background(), "SELECT count(*) FROM "+KeyedKind+" WHERE "+cond).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Release lets a blocking handler of job id return.
func (e *World) Release(t *testing.T, id int64) {
	t.Helper()
	if _, err := e.DB.Exec(context.Background(), `INSERT INTO mp_release (job_id) VALUES ($1)`, id); err != nil {
		t.Fatal(err)
	}
}

// Now reads the database's clock, which the ledger and the leases use.
func (e *World) Now(t *testing.T) time.Time {
	t.Helper()
	var now time.Time
	if err := e.DB.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// CheckQuiet checks what a clean shutdown leaves: no row leased or holding a slot, and no lock key
// under the prefix on any node.
func (e *World) CheckQuiet(t *testing.T) {
	t.Helper()
	if n := e.Count(t, "lease_expires_at IS NOT NULL OR lease_owner IS NOT NULL OR lock_slot IS NOT NULL"); n != 0 {
		t.Errorf("%d rows still leased after every worker stopped", n)
	}
	for i, c := range e.Nodes {
		keys, err := c.Keys(context.Background(), e.Prefix+"*").Result()
		if err != nil {
			t.Errorf("node %s: %v", e.Addrs[i], err)
		} else if len(keys) != 0 {
			var held []string
			for _, k := range keys {
				v, _ := c.Get(context.Background(), k).Result()
				ttl, _ := c.PTTL(context.Background(), k).Result()
				held = append(held, fmt.Sprintf("%s = %q (TTL %v)", k, v, ttl))
			}
			t.Errorf("node %s still holds %v after every worker stopped", e.Addrs[i], held)
		}
	}
	// Stop resigns every maintenance lease (rescue, pruning, schedules), but only as a courtesy (the lease would lapse anyway),
	// and a resignation refused for want of a connection is no fault: noted, not failed.
	var leaders int
	if err := e.DB.QueryRow(context.Background(), `SELECT count(*) FROM jobpipe_leaders`).Scan(&leaders); err != nil || leaders != 0 {
		t.Logf("note: %d leader leases left after every worker stopped (%v)", leaders, err)
	}
}

// WaitFor polls cond every 25 ms until it holds, and fails t after within.
func WaitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// NodeAddrs returns the addresses and test clients of nodes started with testenv.StartRedisNodes.
func NodeAddrs(nodes []*testenv.RedisNode) ([]string, []*redis.Client) {
	var addrs []string
	var clients []*redis.Client
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
		clients = append(clients, n.Client())
	}
	return addrs, clients
}

// ExecLockKey is the Redis key of the execution lock of a blog's slot (see package execlock).
func (e *World) ExecLockKey(blog int64, slot int) string {
	return fmt.Sprintf("%sx:%s:%d:%d", e.Prefix, KeyedKind, blog, slot)
}

func (m Call) String() string {
	end, outcome := "never", "-"
	if m.EndedAt != nil {
		end = m.EndedAt.Format("15:04:05.000000")
	}
	if m.Outcome != nil {
		outcome = *m.Outcome
	}
	return fmt.Sprintf("{job %d blog %d seq %d attempt %d token %d slot %d in %s (pid %d) from %s to %s: %s}",
		m.JobID, m.BlogID, m.Seq, m.Attempt, m.Token, m.Slot, m.Node, m.Pid, m.StartedAt.Format("15:04:05.000000"), end, outcome)
}

// FailureLog reports the first few of many similar failures, and how many there were in all.
type FailureLog struct {
	t    *testing.T
	what string
	n    int
}

// NewFailureLog reports t's failures of one kind, what.
func NewFailureLog(t *testing.T, what string) *FailureLog { return &FailureLog{t: t, what: what} }

// Errorf reports a failure, unless 10 were reported already.
func (r *FailureLog) Errorf(format string, args ...any) {
	r.t.Helper()
	if r.n++; r.n <= 10 {
		r.t.Errorf(format, args...)
	}
}

// Done reports how many failures there were beyond those shown.
func (r *FailureLog) Done() {
	r.t.Helper()
	if r.n > 10 {
		r.t.Errorf("%s: %d failures in all, the first 10 shown", r.what, r.n)
	}
}

// dispatcherBudget is how many dispatchers (worker processes, or dispatchers inside the test
// process) this package's tests run at once. Each holds about six PostgreSQL connections (its pool
// of 3, the ledger's 2, its LISTEN connection), and the test server is shared (max_connections is
// often 100) with the other packages' tests: eight is the peak the multi-process tests had before
// they reserved at all (four, two and one worker processes at once).
const dispatcherBudget = 8

var budget = &semaphore{free: dispatcherBudget}

// Reserve waits until n of the package's dispatcher budget are free, takes them for t, and gives
// them back when t ends (after t's worker processes are gone: cleanups run last first). A test
// reserves everything it will run before it starts any of it, so that tests never wait for each
// other while holding part of what they need. Requests are granted in order of arrival.
func Reserve(t *testing.T, n int) {
	t.Helper()
	if n > dispatcherBudget {
		t.Fatalf("Reserve(%d): the budget is %d dispatchers", n, dispatcherBudget)
	}
	began := time.Now()
	budget.acquire(n)
	t.Cleanup(func() { budget.release(n) })
	if waited := time.Since(began); waited > time.Second {
		t.Logf("waited %v for %d of the package's %d dispatchers", waited.Round(time.Millisecond), n, dispatcherBudget)
	}
}

// semaphore is a weighted semaphore that grants requests first come, first served, so that a
// large request is not starved by a stream of small ones.
type semaphore struct {
	mu      sync.Mutex
	free    int
	waiting []*request
}

type request struct {
	n       int
	granted chan struct{}
}

func (s *semaphore) acquire(n int) {
	s.mu.Lock()
	if len(s.waiting) == 0 && s.free >= n {
		s.free -= n
		s.mu.Unlock()
		return
	}
	r := &request{n: n, granted: make(chan struct{})}
	s.waiting = append(s.waiting, r)
	s.mu.Unlock()
	<-r.granted
}

func (s *semaphore) release(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free += n
	for len(s.waiting) > 0 && s.free >= s.waiting[0].n {
		r := s.waiting[0]
		s.waiting = s.waiting[1:]
		s.free -= r.n
		close(r.granted)
	}
}

// AddPlainKind creates the table of a plain kind named name in e's schema and returns the kind; set
// PlainKind = name in the workers' settings for them to work it.
func (e *World) AddPlainKind(t *testing.T, name string, retryDelay time.Duration) *jobinfo.Kind[PlainJob] {
	t.Helper()
	kind, err := definePlainKind(name, retryDelay)
	if err != nil {
		t.Fatal(err)
	}
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.Exec(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
	return kind
}

// CreateKindTable creates the table of kind in e's schema.
func CreateKindTable[T any](t *testing.T, e *World, kind *jobinfo.Kind[T]) {
	t.Helper()
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.Exec(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
}
