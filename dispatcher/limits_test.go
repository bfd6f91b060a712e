package dispatcher_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
)

// slotWatch records, as the handlers see it, the jobs of each key running at once, the slots they
// hold, and the order they start in. Handlers of a gated watch wait for a token on release.
type slotWatch struct {
	t       *testing.T
	mu      sync.Mutex
	running map[int64]int
	maxSeen map[int64]int
	slots   map[int64]map[int]bool // per key, the slots held by running jobs
	order   map[int64][]int64
	started int
	gated   bool
	release map[int64]chan struct{} // per key: a token lets one running job of the key return
	sleep   time.Duration
	// reach, when set, makes a handler wait (up to reachWait) until its key runs that many jobs
	// before it sleeps, so that a key's jobs overlap however slowly a loaded machine starts them.
	reach int
}

// reachWait bounds how long a handler waits for its key to reach slotWatch.reach.
const reachWait = 2 * time.Second

func newSlotWatch(t *testing.T, gated bool) *slotWatch {
	w := &slotWatch{t: t, running: map[int64]int{}, maxSeen: map[int64]int{}, slots: map[int64]map[int]bool{},
		order: map[int64][]int64{}, gated: gated, release: map[int64]chan struct{}{}}
	if gated {
		// Before the dispatchers' Stop (cleanups run last first), so that running jobs can return.
		t.Cleanup(w.releaseAll)
	}
	return w
}

// gate returns key's release channel.
func (w *slotWatch) gate(key int64) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.release[key] == nil {
		w.release[key] = make(chan struct{}, 1000)
	}
	return w.release[key]
}

// releaseAll lets every job return from now on.
func (w *slotWatch) releaseAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.gated {
		return
	}
	w.gated = false
	for _, c := range w.release {
		close(c)
	}
}

func (w *slotWatch) handler(ctx context.Context, j *dispatcher.Job[postSync]) error {
	key := j.Data.BlogID
	w.mu.Lock()
	if w.slots[key] == nil {
		w.slots[key] = map[int]bool{}
	}
	if w.slots[key][j.Slot] {
		w.t.Errorf("key %d: job %d got slot %d, which a running job of the key holds", key, j.ID, j.Slot)
	}
	w.slots[key][j.Slot] = true
	w.running[key]++
	w.maxSeen[key] = max(w.maxSeen[key], w.running[key])
	w.order[key] = append(w.order[key], j.Data.Seq)
	w.started++
	gated := w.gated
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.running[key]--
		delete(w.slots[key], j.Slot)
	}()
	if gated {
		select {
		case <-w.gate(key):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for deadline := time.Now().Add(reachWait); w.reach > 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if r, _, _ := w.now(key); r >= w.reach {
			break
		}
	}
	time.Sleep(w.sleep)
	return nil
}

// now returns the running count and the most seen at once of key, and how many jobs started in all.
func (w *slotWatch) now(key int64) (running, maxSeen, started int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running[key], w.maxSeen[key], w.started
}

// waitRunning waits until key runs exactly n jobs, and returns how long that took.
func (w *slotWatch) waitRunning(t *testing.T, key int64, n int, within time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	waitFor(t, fmt.Sprintf("key %d to run %d jobs", key, n), within, func() (bool, error) {
		r, _, _ := w.now(key)
		return r == n, nil
	})
	return time.Since(began)
}

// Three dispatchers work 10 keys x 12 jobs of a kind allowing 3 jobs per key: each key runs 3 at
// once, never more, on slots 0 to 2 that no two running jobs share, and starts its jobs in order.
func TestKeyLimitFillsEverySlotAndNoMore(t *testing.T) {
	t.Parallel()
	const keys, perKey, limit = 10, 12, 3
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("post_sync", jobinfo.KeyLimit(limit))
	createKind(t, b.db, kind)
	recordClaimClock(t, b, "post_sync")
	enqueueSeqMajor(t, b, kind, keys, perKey)
	w := newSlotWatch(t, false)
	w.sleep, w.reach = 30*time.Millisecond, limit
	var ds []*dispatcher.Dispatcher
	for i := range 3 {
		cfg := b.cfg
		cfg.NodeName, cfg.Concurrency = fmt.Sprintf("node-%d", i), 20
		ds = append(ds, b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
			return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[postSync]) error {
				if j.Slot < 0 || j.Slot >= limit {
					return dispatcher.Discard(fmt.Errorf("slot %d outside 0..%d", j.Slot, limit-1))
				}
				return w.handler(ctx, j)
			})
		}))
	}
	waitFor(t, "all processed", 30*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "post_sync", "processed_at IS NOT NULL") == keys*perKey, nil
	})
	checkClaimOrder(t, b, "post_sync", limit)
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range int64(keys) {
		if w.maxSeen[k] != limit {
			t.Errorf("key %d: at most %d jobs ran at once, want exactly %d", k, w.maxSeen[k], limit)
		}
		if len(w.order[k]) != perKey {
			t.Errorf("key %d: %d handler calls, want %d", k, len(w.order[k]), perKey)
		}
	}
	var taken uint64
	var refused, released int64
	for _, d := range ds {
		st := d.Stats()
		taken, refused, released = taken+st.Locks.Taken, refused+st.ClaimsRefused, released+st.Released
	}
	t.Logf("for %d jobs: %d lock attempts refused as taken, %d claims refused by the database, %d released unrun", keys*perKey, taken, refused, released)
}

// recordClaimClock makes table record when each claim of a row was written (claimed_clock), for
// checkClaimOrder. started_at cannot tell: it is the claiming transaction's start, and a keyed claim
// pass begins its transaction before it reads the heads and takes their queue locks, so other
// dispatchers may claim the key's earlier jobs meanwhile, with later times, and the pass then claim
// the key's next job, in order but with an earlier time.
func recordClaimClock(t *testing.T, b *runBundle, table string) {
	t.Helper()
	ddl := `ALTER TABLE ` + table + ` ADD COLUMN claimed_clock timestamptz;
CREATE FUNCTION ` + table + `_claim_clock() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.claimed_clock := clock_timestamp(); RETURN NEW; END $$;
CREATE TRIGGER claim_clock BEFORE UPDATE ON ` + table + ` FOR EACH ROW
WHEN (NEW.attempts_made > OLD.attempts_made) EXECUTE FUNCTION ` + table + `_claim_clock();`
	if _, err := b.db.Exec(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
}

// checkClaimOrder checks that within each key jobs were claimed in enqueue order, as far as a limit
// of limit jobs per key lets one tell: when a job is claimed, fewer than limit earlier jobs of its key
// may still be waiting (being claimed at the same moment by other dispatchers). So for each job, at
// most limit-1 earlier jobs of its key were claimed after it (by the claim's own clock: see
// recordClaimClock; a job given back unrun and claimed again counts with its last claim).
func checkClaimOrder(t *testing.T, b *runBundle, table string, limit int) {
	t.Helper()
	if n := countWhere(t, b.db, table, "started_at IS NOT NULL AND claimed_clock IS NULL"); n != 0 {
		t.Fatalf("%d claimed jobs have no claim clock: was recordClaimClock called before the claims?", n)
	}
	var bad []string
	rows, err := b.db.Query(context.Background(), `SELECT j.blog_id, j.seq, j.claimed_clock, x.later FROM `+table+` j
CROSS JOIN LATERAL (SELECT count(*) AS later FROM `+table+` e WHERE e.blog_id = j.blog_id AND e.id < j.id AND e.claimed_clock > j.claimed_clock) x
WHERE x.later >= $1 ORDER BY j.blog_id, j.seq`, limit)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var blog, seq, later int64
		var at time.Time
		if err := rows.Scan(&blog, &seq, &at, &later); err != nil {
			t.Fatal(err)
		}
		bad = append(bad, fmt.Sprintf("blog %d seq %d claimed at %v before %d earlier jobs of its key", blog, seq, at, later))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("jobs claimed out of their key's order (limit %d):\n%s", limit, strings.Join(bad, "\n"))
	}
}

// enqueueSeqMajor enqueues perKey jobs for each of keys blogs, interleaved by seq.
func enqueueSeqMajor(t *testing.T, b *runBundle, kind *jobinfo.Kind[postSync], keys, perKey int) {
	t.Helper()
	var jobs []postSync
	for seq := range perKey {
		for k := range keys {
			jobs = append(jobs, postSync{BlogID: int64(k), Seq: int64(seq)})
		}
	}
	if _, err := dispatcher.EnqueueMany(context.Background(), b.db, kind, jobs); err != nil {
		t.Fatal(err)
	}
}

// A queue lock is its key's slot, not its job's. Key 1's first job tries slot 0 first, which another
// locker holds, and finds slot 1 left to its second job, which takes it: the first job runs on slot 1,
// and the second waits, since it may not start before the first. When slot 0 frees, the second runs
// too, while the first still does: a lock left behind would block it for its TTL (30 s here).
func TestKeyLocksGoToItsFirstHeads(t *testing.T) {
	t.Parallel()
	const limit = 2
	ctx := context.Background()
	b := newRun(t)
	b.cfg.LeaseTTL, b.cfg.RescueInterval = 30*time.Second, 2*time.Second // LeaseTTL is the queue locks' TTL
	kind := jobinfo.MustDefine[postSync]("post_sync", jobinfo.KeyLimit(limit))
	createKind(t, b.db, kind)
	enqueueSeqMajor(t, b, kind, 2, limit) // keys 0 and 1, jobs seq 0 and 1 of each
	held := b.holdQueueLock(t, kind.Info().Name, "1", 0)
	w := newSlotWatch(t, true)
	b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, w.handler)
	})
	t.Cleanup(w.releaseAll) // before the dispatcher's Stop, so that its running jobs return
	w.waitRunning(t, 0, limit, 10*time.Second)
	w.waitRunning(t, 1, 1, 10*time.Second)
	time.Sleep(time.Second) // more passes over key 1
	if got := startedSlots(t, b, 1); got != "[seq 0 on slot 1]" {
		t.Fatalf("key 1 started %s while its slot 0 was held elsewhere, want [seq 0 on slot 1]", got)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w.waitRunning(t, 1, limit, 5*time.Second)
	if got := startedSlots(t, b, 1); got != "[seq 0 on slot 1 seq 1 on slot 0]" {
		t.Errorf("key 1 started %s, want [seq 0 on slot 1 seq 1 on slot 0]", got)
	}
}

// startedSlots lists the started jobs of key (blog_id) in post_sync, with their slots.
func startedSlots(t *testing.T, b *runBundle, key int64) string {
	t.Helper()
	rows, err := b.db.Query(context.Background(),
		"SELECT format('seq %s on slot %s', seq, lock_slot) FROM post_sync WHERE blog_id = $1 AND started_at IS NOT NULL ORDER BY seq", key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(got)
}

// A key's limit changed at runtime applies within a second: raised, more jobs start; lowered, the
// running ones finish and no new one starts until the key is under the new limit; 0 halts the key
// while another key goes on; cleared, the kind's default applies again.
func TestKeyLimitChangesApplyAtRuntime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("post_sync") // one job per key unless changed
	createKind(t, b.db, kind)
	recordClaimClock(t, b, "post_sync")
	enqueueSeqMajor(t, b, kind, 2, 20)
	w := newSlotWatch(t, true)
	cfg := b.cfg
	cfg.Concurrency, cfg.PollInterval = 20, time.Hour // only notifications and the limits cache may wake it
	b.start(t, cfg, func(d *dispatcher.Dispatcher) error { return dispatcher.Register(d, kind, w.handler) })
	w.waitRunning(t, 0, 1, 5*time.Second)
	w.waitRunning(t, 1, 1, 5*time.Second)
	setKey := func(n int) {
		t.Helper()
		if err := limits.SetKey(ctx, b.db, "post_sync", "0", n); err != nil {
			t.Fatal(err)
		}
	}
	// settled waits past the limits cache and any wake-up, then checks key 0's running count and
	// how many of its jobs have started.
	settled := func(what string, running, starts int) {
		t.Helper()
		time.Sleep(1200 * time.Millisecond)
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.running[0] != running || len(w.order[0]) != starts {
			t.Fatalf("%s: key 0 runs %d and has started %d jobs, want %d and %d", what, w.running[0], len(w.order[0]), running, starts)
		}
	}

	// Raised: two more jobs of key 0 start, promptly.
	setKey(3)
	took := w.waitRunning(t, 0, 3, 2*time.Second)
	if took > time.Second {
		t.Errorf("a raised limit took %v to apply, want under 1s", took)
	}
	t.Logf("raised limit applied in %v", took)
	settled("raised to 3", 3, 3)

	// Lowered to 1: the three running jobs go on, and no job starts until the key runs fewer than 1,
	// that is until all three have finished.
	setKey(1)
	w.gate(0) <- struct{}{}
	settled("lowered to 1, one finished", 2, 3)
	w.gate(0) <- struct{}{}
	settled("lowered to 1, two finished", 1, 3)
	w.gate(0) <- struct{}{}
	w.waitRunning(t, 0, 1, 2*time.Second)
	settled("lowered to 1, three finished", 1, 4)

	// Halted: key 0 starts nothing while key 1 goes on.
	setKey(0)
	w.gate(0) <- struct{}{}
	for range 5 {
		w.gate(1) <- struct{}{}
	}
	settled("halted", 0, 4)
	w.mu.Lock()
	if n := len(w.order[1]); n != 6 {
		t.Errorf("key 1 started %d jobs while key 0 was halted, want 6", n)
	}
	w.mu.Unlock()

	// Cleared: the kind's default (1) applies again, and key 0 goes on.
	if err := limits.ClearKey(ctx, b.db, "post_sync", "0"); err != nil {
		t.Fatal(err)
	}
	w.waitRunning(t, 0, 1, 2*time.Second)
	w.releaseAll()
	waitFor(t, "all processed", 20*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "post_sync", "processed_at IS NOT NULL") == 40, nil
	})
	checkClaimOrder(t, b, "post_sync", 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.maxSeen[0] != 3 || w.maxSeen[1] != 1 {
		t.Errorf("at most %d jobs of key 0 and %d of key 1 ran at once, want 3 and 1", w.maxSeen[0], w.maxSeen[1])
	}
}

type sweepJob struct {
	N int64 `jobpipe:"n"`
}

// A total limit holds across dispatchers: two dispatchers with room for 10 jobs each run at most 3
// jobs of the kind at once, and reach 3; pausing the kind halts it, resuming goes on.
func TestMaxRunningHoldsAcrossDispatchers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newRun(t)
	kind := jobinfo.MustDefine[sweepJob]("sweep_job")
	createKind(t, b.db, kind)
	if err := kind.Register(ctx, b.db); err != nil {
		t.Fatal(err)
	}
	if err := limits.SetMaxRunning(ctx, b.db, "sweep_job", 3); err != nil {
		t.Fatal(err)
	}
	jobs := make([]sweepJob, 40)
	if _, err := dispatcher.EnqueueMany(ctx, b.db, kind, jobs); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	running, maxSeen, started := 0, 0, 0
	gate := make(chan struct{})
	for i := range 2 {
		cfg := b.cfg
		cfg.NodeName, cfg.Concurrency = fmt.Sprintf("node-%d", i), 10
		b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
			return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[sweepJob]) error {
				mu.Lock()
				running++
				started++
				maxSeen = max(maxSeen, running)
				mu.Unlock()
				defer func() {
					mu.Lock()
					running--
					mu.Unlock()
				}()
				select {
				case <-gate:
				case <-time.After(20 * time.Millisecond):
				}
				return nil
			})
		})
	}
	waitFor(t, "half the jobs processed", 20*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "sweep_job", "processed_at IS NOT NULL") >= 20, nil
	})
	if err := limits.Pause(ctx, b.db, "sweep_job"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // running jobs finish
	mu.Lock()
	paused := started
	mu.Unlock()
	time.Sleep(700 * time.Millisecond)
	mu.Lock()
	if started != paused || running != 0 {
		t.Errorf("paused kind: %d jobs started after the pause settled, %d running", started-paused, running)
	}
	mu.Unlock()
	if err := limits.Resume(ctx, b.db, "sweep_job"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all processed", 20*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "sweep_job", "processed_at IS NOT NULL") == 40, nil
	})
	mu.Lock()
	defer mu.Unlock()
	if maxSeen != 3 {
		t.Errorf("at most %d jobs ran at once under a total limit of 3", maxSeen)
	}
}

// One key with a deep backlog does not starve the others: with a limit of 2 per key and room for 10
// jobs, the 200 single-job keys enqueued after 2,000 jobs of key 0 all start while key 0 has started
// only a fraction of its backlog, because each key offers only what its limit lets it start.
func TestDeepKeyDoesNotStarveOthers(t *testing.T) {
	t.Parallel()
	const deep, others, limit = 2000, 200, 2
	ctx := context.Background()
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("post_sync", jobinfo.KeyLimit(limit))
	createKind(t, b.db, kind)
	jobs := make([]postSync, 0, deep+others)
	for i := range deep {
		jobs = append(jobs, postSync{BlogID: 0, Seq: int64(i)})
	}
	for k := range others {
		jobs = append(jobs, postSync{BlogID: int64(k + 1)})
	}
	if _, err := dispatcher.EnqueueMany(ctx, b.db, kind, jobs); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	deepStarted, othersStarted, deepAtLastOther := 0, 0, -1
	cfg := b.cfg
	cfg.Concurrency = 10
	b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[postSync]) error {
			mu.Lock()
			if j.Data.BlogID == 0 {
				deepStarted++
			} else if othersStarted++; othersStarted == others {
				deepAtLastOther = deepStarted
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
			return nil
		})
	})
	waitFor(t, "every other key's job to start", 30*time.Second, func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return othersStarted == others, nil
	})
	// Key 0 holds at most 2 of the 10 running slots; the others share the rest, so about a quarter
	// as many key 0 jobs as others start meanwhile. Plain FIFO would start all 2,000 first.
	if deepAtLastOther > others {
		t.Errorf("%d jobs of the deep key started before the last of %d other keys did", deepAtLastOther, others)
	}
	t.Logf("the deep key had started %d of its %d jobs when the last of %d other keys started", deepAtLastOther, deep, others)
}

type regionJob struct {
	Region string `jobpipe:"region,key"`
	Shard  int64  `jobpipe:"shard,key"`
	Seq    int64  `jobpipe:"seq"`
}

// A key of two columns is named by a JSON array, in any spacing: halting ["eu", 1] stops only its
// jobs; ReadUsage reports the keys at their limit.
func TestCompositeKeyLimitAndUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newRun(t)
	kind := jobinfo.MustDefine[regionJob]("region_job", jobinfo.KeyLimit(2))
	createKind(t, b.db, kind)
	if err := kind.Register(ctx, b.db); err != nil {
		t.Fatal(err)
	}
	if err := limits.SetKey(ctx, b.db, "region_job", `["eu",1]`, 0); err != nil {
		t.Fatal(err)
	}
	var jobs []regionJob
	for seq := range 4 {
		for _, k := range []struct {
			r string
			s int64
		}{{"eu", 1}, {"eu", 2}, {"us", 1}} {
			jobs = append(jobs, regionJob{Region: k.r, Shard: k.s, Seq: int64(seq)})
		}
	}
	if _, err := dispatcher.EnqueueMany(ctx, b.db, kind, jobs); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	keysSeen := make(chan string, 100)
	b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[regionJob]) error {
			keysSeen <- j.Key
			<-gate
			return nil
		})
	})
	waitFor(t, "two keys at their limit", 5*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "region_job", "lease_expires_at IS NOT NULL") == 4, nil
	})
	u, err := dispatcher.ReadUsage(ctx, b.db, kind.Info())
	if err != nil {
		t.Fatal(err)
	}
	want := dispatcher.Usage{Kind: "region_job", Running: 4, MaxRunning: limits.Unlimited, Remaining: 8,
		KeysAtLimit: []dispatcher.KeyUsage{{Key: `["eu", 2]`, Running: 2, Limit: 2}, {Key: `["us", 1]`, Running: 2, Limit: 2}}}
	if fmt.Sprint(u) != fmt.Sprint(want) {
		t.Errorf("usage:\n got %+v\nwant %+v", u, want)
	}
	time.Sleep(300 * time.Millisecond)
	close(gate)
	waitFor(t, "the other keys' jobs processed", 10*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "region_job", "processed_at IS NOT NULL") == 8, nil
	})
	close(keysSeen)
	for k := range keysSeen {
		if k == `["eu", 1]` {
			t.Errorf("a job of the halted key %s ran", k)
		}
	}
	if n := countWhere(t, b.db, "region_job", "region = 'eu' AND shard = 1 AND started_at IS NULL"); n != 4 {
		t.Errorf("%d jobs of the halted key wait, want 4", n)
	}
}
