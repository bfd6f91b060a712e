package heads_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/internal/heads"
	"github.com/jobpipe/jobpipe/internal/kindsql"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

type headJob struct {
	K   int64 `jobpipe:"k,key"`
	Seq int64 `jobpipe:"seq"`
}

// statementCounter counts the heads statements a connection sends: fast walks and key scans.
type statementCounter struct {
	mu          sync.Mutex
	walks, scan int
}

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case strings.HasPrefix(d.SQL, "WITH walk AS"):
		c.walks++
	case strings.HasPrefix(d.SQL, "WITH RECURSIVE walked AS"):
		c.scan++
	}
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the counts since the last take.
func (c *statementCounter) take() (walks, scans int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	walks, scans = c.walks, c.scan
	c.walks, c.scan = 0, 0
	return walks, scans
}

// headsFixture is a keyed kind's table (key limit 1, created order) and a pool whose statements are
// counted.
type headsFixture struct {
	db      *pgxpool.Pool
	kind    *jobinfo.Kind[headJob]
	counter *statementCounter
}

func newHeadsFixture(t *testing.T, keys []int64) *headsFixture {
	t.Helper()
	ctx := context.Background()
	s := testenv.NewSchema(t)
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	kind := jobinfo.MustDefine[headJob]("head_job")
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	// One row per entry of keys, ids 1, 2, ... in that order; Seq numbers the rows of a key.
	if _, err := s.Pool.Exec(ctx, `INSERT INTO head_job (k, seq)
		SELECT k, row_number() OVER (PARTITION BY k ORDER BY i) - 1 FROM unnest($1::int8[]) WITH ORDINALITY AS u(k, i) ORDER BY i`, keys); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, "ANALYZE head_job"); err != nil {
		t.Fatal(err)
	}
	cfg := s.Config()
	counter := &statementCounter{}
	cfg.ConnConfig.Tracer = counter
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return &headsFixture{db: db, kind: kind, counter: counter}
}

// newPass returns a heads pass over the fixture's kind.
func (f *headsFixture) newPass(t *testing.T) *heads.Pass {
	t.Helper()
	pass, err := heads.New(f.kind.Info())
	if err != nil {
		t.Fatal(err)
	}
	return pass
}

// oneKeyFront is 600 jobs of key 0 (ids 1-600), then one job of each of keys 1-5 (ids 601-605).
func oneKeyFront() []int64 {
	keys := make([]int64, 600)
	for k := int64(1); k <= 5; k++ {
		keys = append(keys, k)
	}
	return keys
}

// selectHeads runs one pass wanting n jobs in a transaction it rolls back, and returns the ids chosen
// and how many the walks found.
func (f *headsFixture) selectHeads(t *testing.T, pass *heads.Pass, n int) (ids []int64, fromWalk int) {
	t.Helper()
	ctx := context.Background()
	tx, err := f.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	picked, fromWalk, err := pass.Pick(ctx, tx, n, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range picked {
		ids = append(ids, h.ID)
	}
	return ids, fromWalk
}

// idRange is first, first+1, ..., last.
func idRange(first, last int64) []int64 {
	var ids []int64
	for id := first; id <= last; id++ {
		ids = append(ids, id)
	}
	return ids
}

// roundRobin is rows over keys 0..keys-1 in turn, perKey each.
func roundRobin(keys, perKey int) []int64 {
	var out []int64
	for range perKey {
		for k := range keys {
			out = append(out, int64(k))
		}
	}
	return out
}

func checkPass(t *testing.T, f *headsFixture, what string, got []int64, fromWalk int, want []int64, wantFromWalk, wantWalks, wantScans int) {
	t.Helper()
	walks, scans := f.counter.take()
	if !slices.Equal(got, want) {
		t.Errorf("%s: chose %v, want %v", what, got, want)
	}
	if fromWalk != wantFromWalk || walks != wantWalks || scans != wantScans {
		t.Errorf("%s: %d from the walks, in %d walks and %d key scans; want %d, %d and %d", what, fromWalk, walks, scans,
			wantFromWalk, wantWalks, wantScans)
	}
}

// A walk that passes every waiting job has found every head: no key scan follows.
func TestHeadsPassShortBacklogNeedsNoScan(t *testing.T) {
	t.Parallel()
	f := newHeadsFixture(t, roundRobin(10, 3))
	pass := f.newPass(t)
	ids, fromWalk := f.selectHeads(t, pass, 100)
	checkPass(t, f, "pass", ids, fromWalk, idRange(1, 10), 10, 1, 0)
}

// When both walks fall short of the backlog (one key's jobs fill them), the key scan finds the other
// keys' heads.
func TestHeadsPassScansWhenTheWidestWalkFallsShort(t *testing.T) {
	t.Parallel()
	f := newHeadsFixture(t, oneKeyFront())
	pass := f.newPass(t)
	ids, fromWalk := f.selectHeads(t, pass, 10)
	checkPass(t, f, "pass", ids, fromWalk, append([]int64{1}, idRange(601, 605)...), 1, 2, 1)
	if got := heads.Walk(10); got != 140 {
		t.Errorf("the walk for 10 jobs = %d, want 140", got)
	}
	if _, err := heads.New(jobinfo.MustDefine[struct {
		N int64 `jobpipe:"n"`
	}]("plain_job").Info()); err == nil || !strings.Contains(err.Error(), "has no concurrency key") {
		t.Errorf("New of a kind without a key: err = %v, want one saying it has no concurrency key", err)
	}
}

// Every pass walks n jobs, then Walk(n) when those are fewer than n heads, and, when that too finds
// fewer heads than wanted while more jobs wait beyond it, scans the keys for the rest; a walk that
// finds them all ends the pass.
func TestHeadsPassWalksThenScans(t *testing.T) {
	t.Parallel()
	f := newHeadsFixture(t, oneKeyFront())
	pass := f.newPass(t)
	want := append([]int64{1}, idRange(601, 605)...)
	for i := 1; i <= 3; i++ {
		ids, fromWalk := f.selectHeads(t, pass, 10)
		checkPass(t, f, fmt.Sprintf("pass %d, the walks finding 1 head of 6", i), ids, fromWalk, want, 1, 2, 1)
	}
	// 300 keys in turn, 3 jobs each: ids 1-300 are the keys' first jobs, and the first walk finds 100.
	f = newHeadsFixture(t, roundRobin(300, 3))
	pass = f.newPass(t)
	ids, fromWalk := f.selectHeads(t, pass, 100)
	checkPass(t, f, "a first walk finding every head", ids, fromWalk, idRange(1, 100), 100, 1, 0)
	// 50 keys in turn, 3 jobs each: the first walk (100 jobs) finds ids 1-50 and stops at its limit;
	// the longer one (500 jobs) passes every waiting job, and no scan follows.
	f = newHeadsFixture(t, roundRobin(50, 3))
	pass = f.newPass(t)
	ids, fromWalk = f.selectHeads(t, pass, 100)
	checkPass(t, f, "the longer walk passing every job", ids, fromWalk, idRange(1, 50), 50, 2, 0)
}

// lockedElsewhere returns which of ids another transaction finds locked.
func (f *headsFixture) lockedElsewhere(t *testing.T, ids []int64) []int64 {
	t.Helper()
	ctx := context.Background()
	tx, err := f.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, "SELECT id FROM head_job WHERE id = ANY ($1) ORDER BY id FOR UPDATE SKIP LOCKED", ids)
	if err != nil {
		t.Fatal(err)
	}
	free, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	var locked []int64
	for _, id := range ids {
		if !slices.Contains(free, id) {
			locked = append(locked, id)
		}
	}
	return locked
}

// runJob marks job id running on slot, as a claim does.
func (f *headsFixture) runJob(t *testing.T, id int64, slot int) {
	t.Helper()
	if _, err := f.db.Exec(context.Background(), `UPDATE head_job SET lease_expires_at = now() + interval '1 minute',
		lease_owner = 'test', lock_slot = $2, attempts_made = 1, started_at = now() WHERE id = $1`, id, slot); err != nil {
		t.Fatal(err)
	}
}

// A pass locks the heads of keys that run nothing, and leaves those of a key that runs jobs unlocked:
// that key's runs claim its next jobs as they finish, and a pass holding them would end the runs.
func TestHeadsPassLeavesRunningKeysUnlocked(t *testing.T) {
	t.Parallel()
	// Key 1: ids 1-4, id 1 running; key 2: ids 5-6. Three slots per key.
	f := newHeadsFixture(t, []int64{1, 1, 1, 1, 2, 2})
	f.runJob(t, 1, 0)
	ctx := context.Background()
	tx, err := f.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	picked, _, err := f.newPass(t).Pick(ctx, tx, 10, 3)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, h := range picked {
		ids = append(ids, h.ID)
	}
	if want := []int64{2, 3, 5, 6}; !slices.Equal(ids, want) {
		t.Fatalf("chose %v, want %v (key 1's two free slots, key 2's two jobs)", ids, want)
	}
	if got, want := f.lockedElsewhere(t, ids), []int64{5, 6}; !slices.Equal(got, want) {
		t.Errorf("the pass holds %v locked, want %v: key 2's heads only", got, want)
	}
}

// NextOfKeys locks a key's first waiting jobs in order, up to the first that another transaction
// holds: a claim of the jobs after it would overtake it.
func TestNextOfKeysStopsAtALockedJob(t *testing.T) {
	t.Parallel()
	// Key 1: ids 1-4, id 1 running; key 2: ids 5-6.
	f := newHeadsFixture(t, []int64{1, 1, 1, 1, 2, 2})
	f.runJob(t, 1, 0)
	stmt := kindsql.ForDispatcher(f.kind.Info(), kindsql.WriteCodes{}, "jobpipe").NextOfKeys
	ctx := context.Background()
	other, err := f.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	if _, err := other.Exec(ctx, "SELECT id FROM head_job WHERE id = 4 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	tx, err := f.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// Heads named by a job of their key that is no longer first (id 3 for key 1) still take the
	// key's first waiting jobs.
	rows, err := tx.Query(ctx, stmt, []int64{3, 6}, []int32{3, 5})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64][]int64{}
	var head int64
	var next []int64
	if _, err := pgx.ForEachRow(rows, []any{&head, &next}, func() error {
		got[head] = slices.Clone(next)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := map[int64][]int64{3: {2, 3}, 6: {5, 6}}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("locked %v, want %v: key 1 up to the job held elsewhere, key 2 all it has", got, want)
	}
	if locked := f.lockedElsewhere(t, []int64{2, 3, 4, 5, 6}); !slices.Equal(locked, []int64{2, 3, 4, 5, 6}) {
		t.Errorf("locked %v, want every waiting job (4 by the other transaction)", locked)
	}
}
