package integration_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
	"github.com/jobpipe/jobpipe/uniqueness"
)

type syncJob struct {
	AccountID int64  `jobpipe:"account_id,unique"`
	Source    string `jobpipe:"source"`
}

// kindSchema gives a test its own schema with jobpipe's tables and the table of kind, and a pool of
// poolSize connections.
func kindSchema(t *testing.T, spec jobinfo.TableSpec, poolSize int32) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	s := testenv.NewSchema(t)
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	ddl, err := spec.CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	cfg := s.Config()
	cfg.MaxConns = poolSize
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// 64 goroutines enqueue 1,000 jobs each over 100 unique keys: exactly one waiting row per key, and every
// result for a key names that row.
func TestUniqueUnderConcurrentEnqueue(t *testing.T) {
	t.Parallel()
	const goroutines, perGoroutine, keys = 64, 1000, 100
	kind := jobinfo.MustDefine[syncJob]("account_sync")
	db := kindSchema(t, kind.TableSpec(), 16)
	ctx := context.Background()

	var ids [keys]sync.Map // key -> set of ids returned for it
	var inserted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perGoroutine {
				key := (g*7 + i) % keys // each goroutine walks the keys from its own offset
				res, err := dispatcher.Enqueue(ctx, db, kind, syncJob{AccountID: int64(key), Source: "race"})
				if err != nil {
					errs <- err
					return
				}
				if !res.Duplicate {
					inserted.Add(1)
				}
				ids[key].Store(res.ID, true)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := inserted.Load(); got != keys {
		t.Errorf("%d enqueues inserted a row, want exactly %d", got, keys)
	}
	rows, err := db.Query(ctx, `SELECT account_id, id FROM account_sync ORDER BY account_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for ; rows.Next(); n++ {
		var key, id int64
		if err := rows.Scan(&key, &id); err != nil {
			t.Fatal(err)
		}
		if key != int64(n) {
			t.Fatalf("row %d has key %d: keys are missing or doubled", n, key)
		}
		count := 0
		ids[key].Range(func(k, _ any) bool {
			count++
			if k.(int64) != id {
				t.Errorf("key %d: an enqueue returned id %d, but the waiting row is %d", key, k, id)
			}
			return true
		})
		if count != 1 {
			t.Errorf("key %d: enqueues returned %d different ids", key, count)
		}
	}
	if n != keys {
		t.Errorf("%d rows, want %d", n, keys)
	}
}

// While jobs are being enqueued, others start them: a started job never blocks a new one, and there is
// never more than one never-started row per key.
func TestUniqueWhileJobsStart(t *testing.T) {
	t.Parallel()
	const goroutines, perGoroutine, keys = 16, 500, 20
	// NoKey: several jobs of one key may run at once here, so the starter below needs no slots.
	kind := jobinfo.MustDefine[syncJob]("account_sync", jobinfo.NoKey())
	db := kindSchema(t, kind.TableSpec(), 12)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The starter plays a dispatcher's claim: it marks a waiting row started, as a claim would.
	var started atomic.Int64
	starterDone := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			tag, err := db.Exec(ctx, `UPDATE account_sync SET started_at = now(), attempts_made = 1,
				lease_expires_at = now() + interval '1 minute', lock_token = lock_token + 1
				WHERE id = (SELECT id FROM account_sync WHERE started_at IS NULL ORDER BY random() LIMIT 1 FOR UPDATE SKIP LOCKED)`)
			if err != nil && ctx.Err() == nil {
				starterDone <- err
				return
			}
			started.Add(tag.RowsAffected())
		}
		starterDone <- nil
	}()

	var inserted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perGoroutine {
				res, err := dispatcher.Enqueue(ctx, db, kind, syncJob{AccountID: int64((g + i) % keys), Source: "race"},
					dispatcher.OnDuplicate(uniqueness.Replace))
				if err != nil {
					errs <- err
					return
				}
				if !res.Duplicate {
					inserted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	cancel()
	if err := <-starterDone; err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	bg := context.Background()
	var total, maxWaiting int64
	err := db.QueryRow(bg, `SELECT (SELECT count(*) FROM account_sync),
		coalesce((SELECT max(n) FROM (SELECT count(*) AS n FROM account_sync WHERE started_at IS NULL GROUP BY account_id) w), 0)`).
		Scan(&total, &maxWaiting)
	if err != nil {
		t.Fatal(err)
	}
	if total != inserted.Load() {
		t.Errorf("%d rows, but %d enqueues reported inserting one", total, inserted.Load())
	}
	if maxWaiting > 1 {
		t.Errorf("a key has %d never-started rows, want at most 1", maxWaiting)
	}
	if started.Load() == 0 || total <= keys {
		t.Errorf("the test exercised nothing: %d starts, %d rows", started.Load(), total)
	}
	t.Logf("%d rows inserted, %d started while enqueueing", total, started.Load())
}
