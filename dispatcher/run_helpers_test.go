package dispatcher_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/execlock"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

// runBundle is what a dispatcher test works with.
type runBundle struct {
	db    *pgxpool.Pool
	redis *testenv.Redis
	cfg   dispatcher.Config
}

// newRun gives a test its own schema (migrated) and Redis prefix, and a Config for them with short
// timings so that leases and polls play out in a test's time.
func newRun(t *testing.T) *runBundle {
	t.Helper()
	s := testenv.NewSchema(t)
	if err := migrations.Up(context.Background(), s.Pool); err != nil {
		t.Fatal(err)
	}
	r := testenv.NewRedis(t)
	return &runBundle{db: s.Pool, redis: r, cfg: dispatcher.Config{
		DB: s.Pool, Redis: r.Clients, RedisPrefix: r.Prefix, NodeName: t.Name(),
		LeaseTTL: 3 * time.Second, PollInterval: 500 * time.Millisecond, LeaderTTL: 3 * time.Second,
	}}
}

// createKind creates kind's table.
func createKind[T any](t *testing.T, db *pgxpool.Pool, kind *jobinfo.Kind[T]) {
	t.Helper()
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
}

// holdQueueLock takes the queue lock of kind's key and slot as another dispatcher would, with a
// Locker of its own on the run's Redis nodes, closed when the test ends.
func (b *runBundle) holdQueueLock(t *testing.T, kind, key string, slot int) *execlock.Lock {
	t.Helper()
	other, err := execlock.New(&execlock.Config{Nodes: b.redis.Clients, Prefix: b.cfg.RedisPrefix, NodeName: "other"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	held, err := other.TryQueue(context.Background(), kind, key, slot)
	if err != nil {
		t.Fatal(err)
	}
	return held
}

// start creates, registers (through reg) and starts a dispatcher, and stops it when the test ends.
func (b *runBundle) start(t *testing.T, cfg dispatcher.Config, reg func(d *dispatcher.Dispatcher) error) *dispatcher.Dispatcher {
	t.Helper()
	d, err := dispatcher.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg(d); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { stopNow(t, d) }) })
	return d
}

func stopNow(t *testing.T, d *dispatcher.Dispatcher) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Stop(ctx); err != nil && err.Error() != "dispatcher: Stop: the dispatcher is not running" {
		t.Errorf("Stop: %v", err)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, within time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countWhere counts the rows of table matching cond.
func countWhere(t *testing.T, db *pgxpool.Pool, table, cond string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE "+cond).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
