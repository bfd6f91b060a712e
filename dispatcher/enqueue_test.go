package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
	"github.com/jobpipe/jobpipe/uniqueness"
)

type reminder struct {
	UserID  int64           `jobpipe:"user_id,unique"`
	Topic   *string         `jobpipe:"topic,unique"`
	Text    string          `jobpipe:"text"`
	Payload json.RawMessage `jobpipe:"payload"`
}

type plainJob struct {
	N    int64  `jobpipe:"n"`
	Note string `jobpipe:"note"`
}

type bundle struct {
	db        *pgxpool.Pool
	reminders *jobinfo.Kind[reminder]
	plain     *jobinfo.Kind[plainJob]
}

// setup gives a test its own schema holding jobpipe's tables and two kinds' tables.
func setup(t *testing.T) bundle {
	t.Helper()
	ctx := context.Background()
	s := testenv.NewSchema(t)
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	b := bundle{db: s.Pool, reminders: jobinfo.MustDefine[reminder]("reminder", jobinfo.NoKey()), plain: jobinfo.MustDefine[plainJob]("plain_job")}
	for _, spec := range []jobinfo.TableSpec{b.reminders.TableSpec(), b.plain.TableSpec()} {
		ddl, err := spec.CreateSQL()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Pool.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.reminders.Register(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	return b
}

// row is what a test reads back from the reminder table.
type row struct {
	ID           int64
	UserID       int64
	Topic        *string
	Text         string
	ProcessAfter *time.Time
}

func readReminders(t *testing.T, db *pgxpool.Pool) []row {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT id, user_id, topic, text, process_after FROM reminder ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.ID, &r.UserID, &r.Topic, &r.Text, &r.ProcessAfter); err != nil {
			t.Fatal(err)
		}
		if r.ProcessAfter != nil {
			*r.ProcessAfter = r.ProcessAfter.UTC() // comparable with reflect.DeepEqual
		}
		out = append(out, r)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

var payload = json.RawMessage(`{"a":1}`)

func TestEnqueueDuplicateStrategies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	later := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name      string
		strategy  uniqueness.Strategy
		wantText  string
		wantAfter *time.Time
		wantErr   bool
	}{
		{"skip keeps the waiting job", uniqueness.Skip, "first", nil, false},
		{"replace overwrites data and schedule", uniqueness.Replace, "second", &later, false},
		{"replace-data keeps the schedule", uniqueness.ReplaceData, "second", nil, false},
		{"replace-schedule keeps the data", uniqueness.ReplaceSchedule, "first", &later, false},
		{"error names the waiting job", uniqueness.Error, "first", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			first, err := dispatcher.Enqueue(ctx, b.db, b.reminders, reminder{UserID: 1, Topic: ptr("t"), Text: "first", Payload: payload})
			if err != nil || first.Duplicate {
				t.Fatalf("first enqueue = %+v, %v", first, err)
			}
			second, err := dispatcher.Enqueue(ctx, b.db, b.reminders, reminder{UserID: 1, Topic: ptr("t"), Text: "second", Payload: payload},
				dispatcher.ProcessAfter(later), dispatcher.OnDuplicate(tt.strategy))
			if second.ID != first.ID || !second.Duplicate {
				t.Errorf("second enqueue = %+v, want id %d and Duplicate", second, first.ID)
			}
			var dup *uniqueness.DuplicateError
			if tt.wantErr != errors.As(err, &dup) || (tt.wantErr && (dup.ExistingID != first.ID || !errors.Is(err, uniqueness.ErrDuplicate))) {
				t.Errorf("second enqueue error = %v, want DuplicateError: %v", err, tt.wantErr)
			}
			if !tt.wantErr && err != nil {
				t.Fatal(err)
			}
			got := readReminders(t, b.db)
			want := []row{{ID: first.ID, UserID: 1, Topic: ptr("t"), Text: tt.wantText, ProcessAfter: tt.wantAfter}}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("rows = %+v, want %+v", got, want)
			}
		})
	}
}

func TestEnqueueNullUniqueFieldsAreEqual(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	a, err := dispatcher.Enqueue(ctx, b.db, b.reminders, reminder{UserID: 1, Text: "a", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	again, err := dispatcher.Enqueue(ctx, b.db, b.reminders, reminder{UserID: 1, Text: "b", Payload: payload})
	if err != nil || !again.Duplicate || again.ID != a.ID {
		t.Fatalf("NULL topic twice: %+v, %v; want a duplicate of %d", again, err, a.ID)
	}
}

// Until executed: once a job has started, a new job of the same key is accepted, whatever becomes of
// the first (running, retrying, processed, failed).
func TestStartedJobDoesNotBlockNewOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct{ name, update string }{
		{"running", `started_at = now(), lease_expires_at = now() + interval '1 minute', attempts_made = 1, lock_token = lock_token + 1`},
		{"waiting for a retry", `started_at = now(), attempts_made = 1, process_after = now() + interval '1 hour'`},
		{"processed", `started_at = now(), attempts_made = 1, processed_at = now()`},
		{"failed", `started_at = now(), attempts_made = 1, failed_at = now()`},
		{"discarded before it ran", `failed_at = now()`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			first, err := dispatcher.Enqueue(ctx, b.db, b.reminders, reminder{UserID: 7, Topic: ptr("x"), Text: "first", Payload: payload})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.db.Exec(ctx, `UPDATE reminder SET `+tt.update+` WHERE id = $1`, first.ID); err != nil {
				t.Fatal(err)
			}
			second, err := dispatcher.Enqueue(ctx, b.db, b.reminders, reminder{UserID: 7, Topic: ptr("x"), Text: "second", Payload: payload},
				dispatcher.OnDuplicate(uniqueness.Error))
			if err != nil || second.Duplicate || second.ID == first.ID {
				t.Fatalf("enqueue after the first %s = %+v, %v; want a new job", tt.name, second, err)
			}
			third, err := dispatcher.Enqueue(ctx, b.db, b.reminders, reminder{UserID: 7, Topic: ptr("x"), Text: "third", Payload: payload})
			if err != nil || !third.Duplicate || third.ID != second.ID {
				t.Fatalf("third enqueue = %+v, %v; want a duplicate of the second, %d", third, err, second.ID)
			}
			if n := len(readReminders(t, b.db)); n != 2 {
				t.Errorf("%d rows, want 2", n)
			}
		})
	}
}

func TestEnqueueTx(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, commit := range []bool{false, true} {
		tx, err := b.db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dispatcher.EnqueueTx(ctx, tx, b.reminders, reminder{UserID: 3, Text: "tx", Payload: payload}); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if commit {
			want = 1
		}
		if got := len(readReminders(t, b.db)); got != want {
			t.Errorf("commit=%v: %d rows, want %d", commit, got, want)
		}
	}
}

func TestProcessInUsesDatabaseClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	res, err := dispatcher.Enqueue(ctx, b.db, b.reminders, reminder{UserID: 1, Text: "later", Payload: payload}, dispatcher.ProcessIn(90*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var delay time.Duration
	if err := b.db.QueryRow(ctx, `SELECT process_after - created_at FROM reminder WHERE id = $1`, res.ID).Scan(&delay); err != nil {
		t.Fatal(err)
	}
	if delay != 90*time.Minute {
		t.Errorf("process_after - created_at = %v, want 1h30m", delay)
	}
}

func TestEnqueueManyPlainKeepsOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	jobs := make([]plainJob, 500)
	for i := range jobs {
		jobs[i] = plainJob{N: int64(i), Note: "n"}
	}
	res, err := dispatcher.EnqueueMany(ctx, b.db, b.plain, jobs, dispatcher.ProcessIn(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := b.db.Query(ctx, `SELECT id, n, process_after - now() > interval '59 minutes' FROM plain_job ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for ; rows.Next(); i++ {
		var id, n int64
		var scheduled bool
		if err := rows.Scan(&id, &n, &scheduled); err != nil {
			t.Fatal(err)
		}
		if res[i].ID != id || n != int64(i) || !scheduled || res[i].Duplicate {
			t.Fatalf("row %d: id %d n %d scheduled %v; result %+v", i, id, n, scheduled, res[i])
		}
	}
	if i != len(jobs) {
		t.Fatalf("%d rows, want %d", i, len(jobs))
	}
}

func TestEnqueueManyUniqueReportsEachItem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	waiting, err := dispatcher.Enqueue(ctx, b.db, b.reminders, reminder{UserID: 9, Text: "waiting", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	batch := []reminder{
		{UserID: 1, Text: "a", Payload: payload}, {UserID: 2, Text: "b", Payload: payload},
		{UserID: 1, Text: "a again", Payload: payload}, {UserID: 9, Text: "dup of waiting", Payload: payload},
		{UserID: 3, Text: "c", Payload: payload},
	}
	res, err := dispatcher.EnqueueMany(ctx, b.db, b.reminders, batch, dispatcher.OnDuplicate(uniqueness.Error))
	if err != nil {
		t.Fatal(err)
	}
	wantDup := []bool{false, false, true, true, false}
	for i, r := range res {
		if r.Duplicate != wantDup[i] || (r.Err != nil) != wantDup[i] {
			t.Errorf("item %d: %+v, want duplicate=%v", i, r, wantDup[i])
		}
	}
	if res[2].ID != res[0].ID || res[3].ID != waiting.ID {
		t.Errorf("duplicates point at %d and %d, want %d and %d", res[2].ID, res[3].ID, res[0].ID, waiting.ID)
	}
	var dup *uniqueness.DuplicateError
	if !errors.As(res[3].Err, &dup) || dup.ExistingID != waiting.ID {
		t.Errorf("item 3 error = %v", res[3].Err)
	}
	var texts []string
	for _, r := range readReminders(t, b.db) {
		texts = append(texts, r.Text)
	}
	if want := []string{"waiting", "a", "b", "c"}; !reflect.DeepEqual(texts, want) {
		t.Errorf("rows = %v, want %v", texts, want)
	}
}

func TestEnqueueManyIsAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	batch := []reminder{
		{UserID: 1, Text: "fine", Payload: payload},
		{UserID: 2, Text: "bad json", Payload: json.RawMessage(`{"unterminated`)},
	}
	if _, err := dispatcher.EnqueueMany(ctx, b.db, b.reminders, batch); err == nil {
		t.Fatal("EnqueueMany accepted a malformed payload")
	}
	if n := len(readReminders(t, b.db)); n != 0 {
		t.Errorf("%d rows after a failed batch, want 0", n)
	}
	if _, err := dispatcher.EnqueueMany(ctx, b.db, b.plain, []plainJob{{N: 1}}); err != nil {
		t.Fatal(err)
	}
}

// Concurrent Enqueues on a pool share notifications, and each returns only once one sent after its
// commit has gone: when the last of them has returned, a notification has announced every row, so no
// job waits for a poll.
func TestEnqueueNotificationsAreCoalesced(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("coalesced_job")
	createKind(t, b.db, kind)
	seen := listenRows(t, b.db, "coalesced_job")
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			if _, err := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: int64(i), Note: "x"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	waitFor(t, "a notification after the last commit", 5*time.Second, func() (bool, error) {
		got := seen.get()
		return len(got) > 0 && got[len(got)-1] == 64, nil
	})
	time.Sleep(100 * time.Millisecond) // any notification still on its way
	if got := seen.get(); len(got) >= 64 {
		t.Errorf("%d notifications for 64 concurrent enqueues; want fewer than 64", len(got))
	}
	if n := countWhere(t, b.db, "coalesced_job", "true"); n != 64 {
		t.Errorf("%d rows, want 64", n)
	}
}

// rowsSeen records, for each notification of a kind, how many rows its table had when it arrived.
type rowsSeen struct {
	mu  sync.Mutex
	got []int
}

func (r *rowsSeen) get() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.got...)
}

// wait returns the counts once there are n of them, or those there are after within.
func (r *rowsSeen) wait(n int, within time.Duration) []int {
	deadline := time.Now().Add(within)
	for {
		got := r.get()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listenRows listens on the jobpipe channel of db until the test ends and, at each notification for
// kind, counts the rows of the kind's table. A notification is delivered once the transaction that
// sent it has committed, so the count includes at least every row committed before it was sent.
func listenRows(t *testing.T, db *pgxpool.Pool, kind string) *rowsSeen {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := pgx.ConnectConfig(ctx, db.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+uniqueness.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	r := &rowsSeen{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				return
			}
			if n.Payload != kind {
				continue
			}
			var rows int
			if err := db.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{kind}.Sanitize()).Scan(&rows); err != nil {
				return
			}
			r.mu.Lock()
			r.got = append(r.got, rows)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = conn.Close(context.Background())
	})
	return r
}

// kindSchema gives a test its own schema, migrated, with kind's table.
func kindSchema(t *testing.T, kind *jobinfo.Kind[plainJob]) *testenv.Schema {
	t.Helper()
	s := testenv.NewSchema(t)
	if err := migrations.Up(context.Background(), s.Pool); err != nil {
		t.Fatal(err)
	}
	createKind(t, s.Pool, kind)
	return s
}

// Enqueue on a pool has woken the dispatchers by the time it returns: a program that enqueues and
// closes its pool at once loses no wake-up, and two enqueues one after the other are announced by two
// notifications, the second sent after the second commit.
func TestEnqueueOnAPoolWakesBeforeItReturns(t *testing.T) {
	t.Parallel()
	kind := jobinfo.MustDefine[plainJob]("closed_pool_job")
	s := kindSchema(t, kind)
	seen := listenRows(t, s.Pool, "closed_pool_job")
	ctx := context.Background()
	for round := range 3 {
		pool, err := pgxpool.NewWithConfig(ctx, s.Config())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if _, err := dispatcher.Enqueue(ctx, pool, kind, plainJob{N: int64(2*round + i)}); err != nil {
				t.Fatal(err)
			}
		}
		pool.Close()
	}
	if got := seen.wait(6, 5*time.Second); len(got) < 6 || got[len(got)-1] != 6 {
		t.Errorf("rows seen at each notification: %v; want a notification for each of the 6 enqueues, the last seeing them all", got)
	}
}

// Enqueue on a *pgx.Conn uses it only until it returns: the caller may send its next statement at
// once, and each enqueue still wakes the dispatchers.
func TestEnqueueOnAConnLeavesItFree(t *testing.T) {
	t.Parallel()
	kind := jobinfo.MustDefine[plainJob]("own_conn_job")
	s := kindSchema(t, kind)
	seen := listenRows(t, s.Pool, "own_conn_job")
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, s.Config().ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	const n = 50
	for i := range n {
		if _, err := dispatcher.Enqueue(ctx, conn, kind, plainJob{N: int64(i)}); err != nil {
			t.Fatalf("Enqueue %d: %v", i, err)
		}
		if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatalf("the caller's statement after Enqueue %d: %v", i, err)
		}
	}
	if got := seen.wait(n, 5*time.Second); len(got) < n {
		t.Errorf("%d notifications for %d enqueues; want one for each", len(got), n)
	}
}

// A program that opens a pool, enqueues through it from many goroutines and closes it leaves nothing
// behind: no goroutine, and nothing that keeps the closed pool from being collected.
func TestEnqueueKeepsNothingOfAClosedPool(t *testing.T) {
	// Not parallel: goleak must not see the goroutines of other tests.
	kind := jobinfo.MustDefine[plainJob]("leak_job")
	s := kindSchema(t, kind)
	before := goleak.IgnoreCurrent()
	pool := enqueueAndClose(t, s.Config(), kind)
	waitFor(t, "the closed pool to be collected", 5*time.Second, func() (bool, error) {
		runtime.GC()
		return pool.Value() == nil, nil
	})
	goleak.VerifyNone(t, before)
}

// enqueueAndClose opens a pool, enqueues 64 jobs of kind through it at once, closes it and returns a
// weak pointer to it.
func enqueueAndClose(t *testing.T, cfg *pgxpool.Config, kind *jobinfo.Kind[plainJob]) weak.Pointer[pgxpool.Pool] {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			if _, err := dispatcher.Enqueue(ctx, pool, kind, plainJob{N: int64(i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	pool.Close()
	return weak.Make(pool)
}

// On a connection inside a transaction opened with plain SQL, Enqueue cannot follow the commit: its
// notification is part of the transaction and arrives only once it commits.
func TestEnqueueInsideAnOpenTransactionNotifiesAtCommit(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("open_tx_job")
	createKind(t, b.db, kind)
	notes := listenNotesAt(t, b.db, "open_tx_job")
	ctx := context.Background()
	conn, err := b.db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := dispatcher.Enqueue(ctx, conn.Conn(), kind, plainJob{N: 1, Note: "x"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := notes.get(); len(got) != 0 {
		t.Fatalf("%d notifications before the commit, want none", len(got))
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the notification of the commit", 5*time.Second, func() (bool, error) { return len(notes.get()) == 1, nil })
}
