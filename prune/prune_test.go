package prune_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
	"github.com/jobpipe/jobpipe/prune"
)

type report struct {
	N int64 `jobpipe:"n"`
}

// setup gives a test a migrated schema with kind "report"'s table.
func setup(t *testing.T) (*pgxpool.Pool, *jobinfo.Info) {
	t.Helper()
	ctx := context.Background()
	s := testenv.NewSchema(t)
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	kind := jobinfo.MustDefine[report]("report")
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	return s.Pool, kind.Info()
}

// row is a job to insert: n is its data, the rest its pipeline state, as ages before now.
type row struct {
	n                          int64
	created, processed, failed time.Duration // ago; 0: NULL (created: now)
	leased                     bool
}

// insert inserts rows in order (ids ascending) and returns their ids.
func insert(t *testing.T, db *pgxpool.Pool, rows ...row) []int64 {
	t.Helper()
	ago := func(d time.Duration) *float64 {
		if d == 0 {
			return nil
		}
		s := d.Seconds()
		return &s
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		err := db.QueryRow(context.Background(), `INSERT INTO report (n, created_at, processed_at, failed_at, started_at, lease_expires_at, lease_owner)
			VALUES ($1, now() - make_interval(secs => coalesce($2, 0)), now() - make_interval(secs => $3), now() - make_interval(secs => $4),
				CASE WHEN $5 THEN now() END, CASE WHEN $5 THEN now() + interval '1 minute' END, CASE WHEN $5 THEN 'node' END)
			RETURNING id`, r.n, ago(r.created), ago(r.processed), ago(r.failed), r.leased).Scan(&ids[i])
		if err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// left returns the n of every row left, ascending.
func left(t *testing.T, db *pgxpool.Pool) []int64 {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT n FROM report ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

const (
	day  = 24 * time.Hour
	week = 7 * day
)

// Exactly the rows finished before their retention go: those just inside stay, as do waiting and
// running rows however old.
func TestPruneRunDeletesExactlyTheOldFinishedRows(t *testing.T) {
	t.Parallel()
	db, info := setup(t)
	insert(t, db,
		row{n: 1, created: day + 2*time.Minute, processed: day + time.Minute}, // processed just outside: deleted
		row{n: 2, created: day, processed: day - time.Minute},                 // processed just inside
		row{n: 3, created: week + 2*time.Minute, failed: week + time.Minute},  // failed just outside: deleted
		row{n: 4, created: week, failed: week - time.Minute},                  // failed just inside
		row{n: 5, created: 2 * day, failed: 2*day - time.Minute},              // failed, older than a day: kept a week
		row{n: 6, created: 30 * day},                                          // waiting for a month
		row{n: 7, created: 30 * day, leased: true},                            // running
		// Not a state the dispatcher writes, but a lease means hands off, whatever else the row says.
		row{n: 8, created: 30 * day, processed: 29 * day, leased: true},
		row{n: 9, created: 10 * day, processed: 9 * day}, // deleted
		row{n: 10}, // waiting, new
	)
	res, err := prune.Run(context.Background(), db, info, prune.Options{Processed: day, Failed: week})
	if err != nil {
		t.Fatal(err)
	}
	if res != (prune.Result{Processed: 2, Failed: 1, Batches: 2}) {
		t.Errorf("Result %+v, want 2 processed, 1 failed, in 2 batches", res)
	}
	if got, want := left(t, db), []int64{2, 4, 5, 6, 7, 8, 10}; !slices.Equal(got, want) {
		t.Errorf("rows left %v, want %v", got, want)
	}
}

// The kind's own retention, and keeping forever.
func TestPruneRetention(t *testing.T) {
	t.Parallel()
	info := jobinfo.MustDefine[report]("report").Info()
	if o := prune.Retention(info); o.Processed != jobinfo.DefaultRetainProcessed || o.Failed != jobinfo.DefaultRetainFailed ||
		jobinfo.DefaultRetainProcessed != day || jobinfo.DefaultRetainFailed != week {
		t.Errorf("default retention %+v", o)
	}
	_, err := jobinfo.Define[report]("report", jobinfo.Retention(0, time.Hour))
	if want := `jobinfo: kind "report": jobinfo: retention of processed jobs is 0: give how long to keep them (e.g. 24*time.Hour), or jobinfo.KeepForever`; err == nil || err.Error() != want {
		t.Errorf("Retention(0, ...): %v\nwant %s", err, want)
	}

	db, info := setup(t)
	insert(t, db, row{n: 1, created: 400 * day, processed: 399 * day}, row{n: 2, created: 400 * day, failed: 399 * day})
	forever := jobinfo.MustDefine[report]("report", jobinfo.Retention(jobinfo.KeepForever, time.Hour)).Info()
	res, err := prune.Run(context.Background(), db, forever, prune.Retention(forever))
	if err != nil || res != (prune.Result{Failed: 1, Batches: 2}) {
		t.Errorf("processed kept forever: %+v, %v", res, err)
	}
	res, err = prune.Run(context.Background(), db, info, prune.Options{Processed: jobinfo.KeepForever})
	if err != nil || res != (prune.Result{}) || !slices.Equal(left(t, db), []int64{1}) {
		t.Errorf("everything kept: %+v, %v, rows %v; want no statement run, row 1 left", res, err, left(t, db))
	}
}

// More rows than one batch: several statements, each reported to Progress.
func TestPruneRunInBatches(t *testing.T) {
	t.Parallel()
	db, info := setup(t)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `INSERT INTO report (n, created_at, processed_at)
		SELECT g, now() - interval '2 days', now() - interval '2 days' FROM generate_series(1, 2500) g`); err != nil {
		t.Fatal(err)
	}
	insert(t, db, row{n: 2501}, row{n: 2502, processed: time.Second})
	var got []prune.Progress
	res, err := prune.Run(ctx, db, info, prune.Options{Processed: day, Failed: day, BatchSize: 1000,
		Progress: func(p prune.Progress) { got = append(got, p) }})
	if err != nil {
		t.Fatal(err)
	}
	want := []prune.Progress{
		{Processed: 1000, Batches: 1, ID: 1000, MaxID: 2502},
		{Processed: 2000, Batches: 2, ID: 2000, MaxID: 2502},
		{Processed: 2500, Batches: 3, ID: 2502, MaxID: 2502},
		{Processed: 2500, Batches: 4, ID: 2502, MaxID: 2502}, // past the end
	}
	if !slices.Equal(got, want) {
		t.Errorf("progress:\n got %+v\nwant %+v", got, want)
	}
	if res != (prune.Result{Processed: 2500, Batches: 4}) || !slices.Equal(left(t, db), []int64{2501, 2502}) {
		t.Errorf("Result %+v, rows %v", res, left(t, db))
	}
}

// The walk ends at the first window of rows all created after the cutoff: the rest of the table is
// not visited.
func TestPruneRunStopsAtNewRows(t *testing.T) {
	t.Parallel()
	db, info := setup(t)
	var rows []row
	for n := int64(1); n <= 5; n++ {
		rows = append(rows, row{n: n, created: 3 * day, processed: 2 * day})
	}
	for n := int64(6); n <= 35; n++ {
		rows = append(rows, row{n: n, created: time.Minute, processed: time.Second})
	}
	// An old row with a late id (its transaction was open long): the next run, once the new rows
	// above are old too, gets it.
	rows = append(rows, row{n: 36, created: 3 * day, processed: 2 * day})
	insert(t, db, rows...)
	res, err := prune.Run(context.Background(), db, info, prune.Options{Processed: day, BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res != (prune.Result{Processed: 5, Batches: 2}) {
		t.Errorf("Result %+v, want 5 processed in 2 batches", res)
	}
	if got := left(t, db); len(got) != 31 || got[0] != 6 || got[30] != 36 {
		t.Errorf("rows left %v, want 6 to 36", got)
	}
}

// A finished row that another transaction holds, and turns back to waiting (a retry by hand), is
// waited for and then re-checked: it stays.
func TestPruneRunRechecksRowsChangedMeanwhile(t *testing.T) {
	t.Parallel()
	db, info := setup(t)
	ctx := context.Background()
	ids := insert(t, db, row{n: 1, created: 3 * day, processed: 2 * day}, row{n: 2, created: 3 * day, processed: 2 * day})
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `UPDATE report SET processed_at = NULL, process_after = NULL WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	type result struct {
		res prune.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := prune.Run(ctx, db, info, prune.Options{Processed: day})
		done <- result{res, err}
	}()
	// Wait until the prune waits for the row's lock.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting bool
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%DELETE FROM%report%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the prune never waited for the locked row")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.res != (prune.Result{Processed: 1, Batches: 2}) {
		t.Errorf("Result %+v, %v; want 1 processed in 2 batches (the second finds the end)", r.res, r.err)
	}
	if got := left(t, db); !slices.Equal(got, []int64{1}) {
		t.Errorf("rows left %v, want the retried row 1", got)
	}
}

// Cancelling between batches stops the run; what was deleted stays deleted and is counted.
func TestPruneRunCancelled(t *testing.T) {
	t.Parallel()
	db, info := setup(t)
	var rows []row
	for n := int64(1); n <= 30; n++ {
		rows = append(rows, row{n: n, created: 3 * day, processed: 2 * day})
	}
	insert(t, db, rows...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := prune.Run(ctx, db, info, prune.Options{Processed: day, BatchSize: 10, Progress: func(prune.Progress) { cancel() }})
	if !errors.Is(err, context.Canceled) || err.Error() != fmt.Sprintf(`prune: kind "report": stopped after deleting 10 processed and 0 failed jobs: %v`, context.Canceled) {
		t.Errorf("error %v", err)
	}
	if res != (prune.Result{Processed: 10, Batches: 1}) || len(left(t, db)) != 20 {
		t.Errorf("Result %+v, %d rows left; want 10 deleted, 20 left", res, len(left(t, db)))
	}
}
