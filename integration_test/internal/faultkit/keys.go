package faultkit

// What the per-key limit tests share: enqueueing keys, reading the handlers' concurrency counts
// (mp_conc), a database-side check of the order in which a key's jobs are claimed, and the checks
// every such test ends with.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/execlock"
	"github.com/jobpipe/jobpipe/limits"
)

// orderCheckSQL makes the database record, whenever a job of the kind is claimed, every earlier job
// of its key (lower id: the kind's created order) that is still waiting and that no other transaction
// has locked. Such a job is neither running nor being claimed, so the claim overtook it: against I5,
// since a key's jobs must start in order even when several of them run at once. Jobs being claimed
// concurrently are locked (FOR UPDATE by the dispatcher's head queries) and skipped, so concurrent
// claims of a key's next jobs are not reported; a violation that hides behind such a lock is missed,
// never invented. The trigger fires after the claim statement, so the jobs a statement claims
// together see each other as claimed.
const orderCheckSQL = `CREATE TABLE mp_order_violations (
	job_id bigint NOT NULL,
	blog_id bigint NOT NULL,
	seq bigint NOT NULL,
	earlier_id bigint NOT NULL,
	earlier_seq bigint NOT NULL,
	earlier_attempts int NOT NULL,
	earlier_due timestamptz,
	at timestamptz NOT NULL DEFAULT clock_timestamp());

-- Every claim, with its transaction, to explain a violation.
CREATE TABLE mp_claims (
	job_id bigint NOT NULL,
	blog_id bigint NOT NULL,
	seq bigint NOT NULL,
	slot int,
	owner text,
	xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
	at timestamptz NOT NULL DEFAULT clock_timestamp());

CREATE FUNCTION mp_check_claim_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mp_claims (job_id, blog_id, seq, slot, owner) VALUES (NEW.id, NEW.blog_id, NEW.seq, NEW.lock_slot, NEW.lease_owner);
	INSERT INTO mp_order_violations (job_id, blog_id, seq, earlier_id, earlier_seq, earlier_attempts, earlier_due)
	SELECT NEW.id, NEW.blog_id, NEW.seq, e.id, e.seq, e.attempts_made, e.process_after
	FROM (SELECT e.* FROM mp_post_sync e
		WHERE e.blog_id = NEW.blog_id AND e.id < NEW.id
			AND e.lease_expires_at IS NULL AND e.processed_at IS NULL AND e.failed_at IS NULL
		FOR KEY SHARE SKIP LOCKED) e;
	RETURN NULL;
END
$$;

CREATE TRIGGER mp_check_claim_order AFTER UPDATE OF lease_expires_at ON mp_post_sync
	FOR EACH ROW WHEN (OLD.lease_expires_at IS NULL AND NEW.lease_expires_at IS NOT NULL)
	EXECUTE FUNCTION mp_check_claim_order()`

// InstallOrderCheck installs orderCheckSQL in e's schema.
func (e *World) InstallOrderCheck(t *testing.T) {
	t.Helper()
	if _, err := e.DB.Exec(context.Background(), orderCheckSQL); err != nil {
		t.Fatal(err)
	}
}

// CheckOrder fails t for every claim that overtook an earlier waiting job of its key, and shows the
// claims of the key around it (each with its claim transaction, xid).
func (e *World) CheckOrder(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	rows, err := e.DB.Query(ctx, `SELECT job_id, blog_id, seq, earlier_id, earlier_seq, earlier_attempts, earlier_due, at
		FROM mp_order_violations ORDER BY at`)
	if err != nil {
		t.Fatal(err)
	}
	type violation struct {
		ID, Blog, Seq, EarlierID, EarlierSeq int64
		EarlierAttempts                      int
		EarlierDue                           *time.Time
		At                                   time.Time
	}
	vs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[violation])
	if err != nil {
		t.Fatal(err)
	}
	report := NewFailureLog(t, "claims in the key's order")
	defer report.Done()
	for i, v := range vs {
		due := "now"
		if v.EarlierDue != nil {
			due = v.EarlierDue.Format("15:04:05.000")
		}
		var claims []string
		if i < 3 {
			rows, err := e.DB.Query(ctx, `SELECT format('job %s seq %s slot %s by %s in xid %s at %s', job_id, seq, slot, owner, xid, to_char(at, 'HH24:MI:SS.US'))
				FROM mp_claims WHERE blog_id = $1 AND at BETWEEN $2::timestamptz - interval '1 second' AND $2::timestamptz + interval '1 second' ORDER BY at`, v.Blog, v.At)
			if err != nil {
				t.Fatal(err)
			}
			if claims, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				t.Fatal(err)
			}
		}
		report.Errorf("blog %d: job %d (seq %d) was claimed at %s while job %d (seq %d, %d attempts made, due %s) waited unclaimed; the key's claims within 1 s: %v",
			v.Blog, v.ID, v.Seq, v.At.Format("15:04:05.000000"), v.EarlierID, v.EarlierSeq, v.EarlierAttempts, due, claims)
	}
}

// Enqueued is what the test enqueued, by job id.
type Enqueued map[int64]KeyedJob

// Enqueue enqueues perKey jobs for each blog, seq numbers from firstSeq on, seq-major (so that the
// keys' jobs are interleaved in id order), and adds them to into.
func (e *World) Enqueue(t *testing.T, into Enqueued, blogs []int64, firstSeq, perKey int) []int64 {
	t.Helper()
	var jobs []KeyedJob
	for seq := firstSeq; seq < firstSeq+perKey; seq++ {
		for _, b := range blogs {
			jobs = append(jobs, KeyedJob{BlogID: b, Seq: int64(seq)})
		}
	}
	res, err := dispatcher.EnqueueMany(context.Background(), e.DB, e.Kind, jobs)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i, r := range res {
		if r.Err != nil || r.Duplicate {
			t.Fatalf("enqueue %+v: %+v", jobs[i], r)
		}
		into[r.ID] = jobs[i]
		ids = append(ids, r.ID)
	}
	return ids
}

// ReleaseAll lets the blocking handlers of ids return (now or whenever they start).
func (e *World) ReleaseAll(t *testing.T, ids []int64) {
	t.Helper()
	if _, err := e.DB.Exec(context.Background(), `INSERT INTO mp_release (job_id) SELECT unnest($1::bigint[]) ON CONFLICT DO NOTHING`, ids); err != nil {
		t.Fatal(err)
	}
}

// Conc is one blog's row of mp_conc.
type Conc struct {
	Running, MaxSeen, SlotClashes int
	Slots                         []int32
}

// Conc reads mp_conc by blog.
func (e *World) Conc(t *testing.T) map[int64]Conc {
	t.Helper()
	rows, err := e.DB.Query(context.Background(), `SELECT blog_id, running, max_seen, slot_clashes, slots FROM mp_conc`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]Conc{}
	var blog int64
	var c Conc
	_, err = pgx.ForEachRow(rows, []any{&blog, &c.Running, &c.MaxSeen, &c.SlotClashes, &c.Slots}, func() error {
		out[blog] = c
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Starts returns the blog's handler calls in the order they started (ledger row order).
func (e *World) Starts(t *testing.T, blog int64) []Call {
	t.Helper()
	var out []Call
	for _, m := range e.Ledger(t) {
		if m.BlogID == blog {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].N < out[j].N })
	return out
}

// Running returns the blog's handler calls that have not ended.
func (e *World) Running(t *testing.T, blog int64) []Call {
	t.Helper()
	var out []Call
	for _, m := range e.Starts(t, blog) {
		if m.EndedAt == nil {
			out = append(out, m)
		}
	}
	return out
}

// RunningRows counts the blog's rows the database shows running (leased).
func (e *World) RunningRows(t *testing.T, blog int64) int {
	t.Helper()
	return e.Count(t, fmt.Sprintf("lease_expires_at IS NOT NULL AND blog_id = %d", blog))
}

// KeyOf is the key value of a blog as the limits package names it: its decimal text.
func KeyOf(blog int64) string { return strconv.FormatInt(blog, 10) }

// SetLimit applies a limits change and returns the database's clock just before it (a lower bound
// of the moment it committed), to measure how long the dispatchers took to apply it.
func (e *World) SetLimit(t *testing.T, what string, change func(ctx context.Context) error) time.Time {
	t.Helper()
	before := e.Now(t)
	if err := change(context.Background()); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return before
}

// SetKey sets blog's limit override.
func (e *World) SetKey(t *testing.T, blog int64, n int) time.Time {
	t.Helper()
	return e.SetLimit(t, fmt.Sprintf("SetKey(%d, %d)", blog, n), func(ctx context.Context) error {
		return limits.SetKey(ctx, e.DB, KeyedKind, KeyOf(blog), n)
	})
}

// WaitRunning waits until the blog has want handlers running and returns them.
func (e *World) WaitRunning(t *testing.T, blog int64, want int, within time.Duration) []Call {
	t.Helper()
	var got []Call
	WaitFor(t, fmt.Sprintf("%d jobs of blog %d running", want, blog), within, func() bool {
		got = e.Running(t, blog)
		if len(got) > want {
			t.Fatalf("blog %d: %d jobs running, want %d: %v", blog, len(got), want, got)
		}
		return len(got) == want
	})
	return got
}

// NoNewStart watches the blog for d and fails t if any handler of it starts beyond the first
// already of its calls.
func (e *World) NoNewStart(t *testing.T, blog int64, already int, d time.Duration, why string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if s := e.Starts(t, blog); len(s) > already {
			t.Fatalf("%s: a job of blog %d started: %v", why, blog, s[already:])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// LatestStart is the latest start among entries.
func LatestStart(entries []Call) time.Time {
	var latest time.Time
	for _, m := range entries {
		if m.StartedAt.After(latest) {
			latest = m.StartedAt
		}
	}
	return latest
}

// CheckDoneOnce checks that every enqueued job ran exactly once, on its first attempt, in a slot
// below slotsBelow[blog] (or below defaultSlots), ended ok and was recorded processed.
func (e *World) CheckDoneOnce(t *testing.T, enqueued Enqueued, slotsBelow map[int64]int, defaultSlots int) {
	t.Helper()
	once := NewFailureLog(t, "exactly once")
	defer once.Done()
	calls := map[int64]int{}
	for _, m := range e.Ledger(t) {
		calls[m.JobID]++
		want, ok := enqueued[m.JobID]
		limit, set := slotsBelow[m.BlogID]
		if !set {
			limit = defaultSlots
		}
		switch {
		case !ok:
			once.Errorf("the ledger names job %d, which was never enqueued", m.JobID)
		case m.BlogID != want.BlogID || m.Seq != want.Seq:
			once.Errorf("job %d ran as blog %d seq %d, enqueued as blog %d seq %d", m.JobID, m.BlogID, m.Seq, want.BlogID, want.Seq)
		case m.EndedAt == nil || m.Outcome == nil || *m.Outcome != "ok" || m.Attempt != 1:
			once.Errorf("job %d: handler call %v, want attempt 1, ended ok", m.JobID, m)
		case m.Slot < 0 || m.Slot >= limit:
			once.Errorf("job %d ran in slot %d of blog %d, want 0 to %d", m.JobID, m.Slot, m.BlogID, limit-1)
		}
	}
	for id := range enqueued {
		if calls[id] != 1 {
			once.Errorf("job %d: %d handler calls, want exactly 1", id, calls[id])
		}
	}
	if n := e.Count(t, "processed_at IS NOT NULL AND attempts_made = 1 AND failed_at IS NULL AND last_error IS NULL"); n != len(enqueued) {
		once.Errorf("%d of %d rows processed on their first attempt without error", n, len(enqueued))
	}
}

// CheckConc checks every blog's final mp_conc row: nothing left running, never two handlers in one
// slot, and at most max[blog] (or defaultMax) at once. It returns the blogs' max_seen.
func (e *World) CheckConc(t *testing.T, max map[int64]int, defaultMax int) map[int64]int {
	t.Helper()
	seen := map[int64]int{}
	for blog, c := range e.Conc(t) {
		limit, set := max[blog]
		if !set {
			limit = defaultMax
		}
		if c.Running != 0 || len(c.Slots) != 0 {
			t.Errorf("blog %d: %d handlers (slots %v) still counted running after every job ended", blog, c.Running, c.Slots)
		}
		if c.SlotClashes != 0 {
			t.Errorf("blog %d: %d times a handler started in a slot another running handler of the blog held", blog, c.SlotClashes)
		}
		if c.MaxSeen > limit {
			t.Errorf("blog %d: %d handlers ran at once, want at most %d", blog, c.MaxSeen, limit)
		}
		seen[blog] = c.MaxSeen
	}
	return seen
}

// CheckFenceAfterRedisLoss shows what a Redis node restarted empty leaves: Redis alone now lets a
// second holder take the execution lock of (blog, slot), which a running job holds, and the database
// still refuses a second running row in that slot (the running-slots index, invariant I3).
func (e *World) CheckFenceAfterRedisLoss(t *testing.T, blog int64, slot int) {
	t.Helper()
	ctx := context.Background()
	clients, err := execlock.NewClients(e.Addrs...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	locker, err := execlock.New(&execlock.Config{Nodes: clients, Prefix: e.Prefix, NodeName: "intruder"})
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	lk, err := locker.TryExec(ctx, KeyedKind, KeyOf(blog), slot)
	if err != nil {
		t.Fatalf("after the restart, a second holder could not take slot %d of blog %d (%v): the scenario did not happen", slot, blog, err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := e.DB.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO `+KeyedKind+` (blog_id, seq, started_at, lease_expires_at, lease_owner, lock_token, lock_slot, attempts_made)
		VALUES ($1, 99, now(), now() + interval '1 minute', 'intruder', 1, $2, 1)`, blog, slot)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Errorf("a second running row in slot %d of blog %d: %v; want a unique violation", slot, blog, err)
	}
}
