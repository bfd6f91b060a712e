package dispatcher_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

func TestConfigListsEveryProblem(t *testing.T) {
	t.Parallel()
	two := []*redis.Client{redis.NewClient(&redis.Options{}), redis.NewClient(&redis.Options{})}
	defer func() {
		for _, c := range two {
			_ = c.Close()
		}
	}()
	_, err := dispatcher.New(dispatcher.Config{Redis: two, Concurrency: -1, ClaimBatch: -1, LeaseTTL: time.Second, HeartbeatInterval: 900 * time.Millisecond,
		RescueInterval: time.Minute, LeaderTTL: 15 * time.Second, HandlerGrace: -time.Second, FinishWait: time.Second})
	if err == nil {
		t.Fatal("New accepted a bad config")
	}
	for _, want := range []string{
		"dispatcher: Config.DB is nil: pass a *pgxpool.Pool",
		"dispatcher: Config.Redis has 2 nodes: Redlock needs an odd number (1, 3 or 5) of independent nodes",
		"dispatcher: Config.Concurrency is -1: give 1 or more",
		"dispatcher: Config.ClaimBatch is -1: give 1 or more, or 0 for the default",
		"dispatcher: Config.HeartbeatInterval 900ms must be positive and at most half of LeaseTTL (1s)",
		"dispatcher: Config.RescueInterval 1m0s must be positive and shorter than LeaderTTL 15s",
		"dispatcher: Config.HandlerGrace -1s is negative: give how long a handler whose context ended may take to return (default 5s)",
		"dispatcher: Config.FinishWait 1s must be shorter than HeartbeatInterval 900ms, so that a finished job's lease outlasts the wait (default 10ms; negative: no wait)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}

// Defaults never contradict each other: a long lease alone is a valid configuration.
func TestLongLeaseDefaults(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	if _, err := dispatcher.New(dispatcher.Config{DB: b.db, LeaseTTL: 10 * time.Minute}); err != nil {
		t.Errorf("New with only a 10-minute lease: %v", err)
	}
}

func TestRegisterAndStartErrors(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	keyed := jobinfo.MustDefine[postSync]("post_sync")
	plain := jobinfo.MustDefine[plainJob]("plain_job")
	noRedis := b.cfg
	noRedis.Redis = nil
	d, err := dispatcher.New(noRedis)
	if err != nil {
		t.Fatal(err)
	}
	handler := func(context.Context, *dispatcher.Job[postSync]) error { return nil }
	if err := dispatcher.Register(d, keyed, handler); err == nil || !strings.Contains(err.Error(), "needs Redis lock nodes: set Config.Redis") {
		t.Errorf("Register of a keyed kind without Redis = %v", err)
	}
	if err := d.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "no kinds are registered") {
		t.Errorf("Start with no kinds = %v", err)
	}
	d, _ = dispatcher.New(b.cfg)
	if err := dispatcher.Register(d, keyed, handler); err != nil {
		t.Fatal(err)
	}
	if err := dispatcher.Register(d, keyed, handler); err == nil || !strings.Contains(err.Error(), `"post_sync": the kind is registered already`) {
		t.Errorf("second Register = %v", err)
	}
	if err := dispatcher.Register(d, plain, func(context.Context, *dispatcher.Job[plainJob]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// Neither table exists: Start says so for both, and starts nothing.
	err = d.Start(context.Background())
	for _, want := range []string{`table "post_sync" does not exist`, `table "plain_job" does not exist`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Start without tables = %v, want it to say %q", err, want)
		}
	}
	if err := d.Stop(context.Background()); err == nil {
		t.Error("Stop of a dispatcher that never started succeeded")
	}
}

// Without LISTEN (PgBouncer in transaction mode) jobs are found by polling.
func TestPollOnly(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("plain_job")
	createKind(t, b.db, kind)
	cfg := b.cfg
	cfg.PollOnly, cfg.PollInterval = true, 50*time.Millisecond
	done := make(chan int64, 10)
	b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[plainJob]) error {
			done <- j.Data.N
			return nil
		})
	})
	for i := range 5 {
		if _, err := dispatcher.Enqueue(context.Background(), b.db, kind, plainJob{N: int64(i)}); err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-done:
			if n != int64(i) {
				t.Errorf("ran job %d, want %d", n, i)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a job was not picked up by polling")
		}
	}
}

// Start refuses a struct that lost the table's unique field and key (json tags copied from another
// struct) and misses a NOT NULL column: without the check every Enqueue would fail with a raw
// constraint error and every claim would loop.
func TestStartRefusesStructThatDiffersFromTable(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	type delivery struct {
		CustomerID int64  `jobpipe:"customer_id,key"`
		EventID    string `jobpipe:"event_id,unique"`
	}
	createKind(t, b.db, jobinfo.MustDefine[delivery]("webhook_delivery"))
	if _, err := b.db.Exec(context.Background(), `ALTER TABLE webhook_delivery ADD COLUMN priority integer NOT NULL`); err != nil {
		t.Fatal(err)
	}
	type Delivery struct {
		CustomerID int64  `json:"customer_id"`
		EventID    string `json:"event_id"`
	}
	d, err := dispatcher.New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	kind := jobinfo.MustDefine[Delivery]("webhook_delivery")
	if err := dispatcher.Register(d, kind, func(context.Context, *dispatcher.Job[Delivery]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	err = d.Start(context.Background())
	if err == nil {
		stopNow(t, d)
	}
	want := `jobinfo: table "webhook_delivery" does not match kind "webhook_delivery" (4 problems):
  - column "priority" is NOT NULL and not in Delivery: add a field for it or give the column a default
  - the until-executed unique index "webhook_delivery_unique_waiting" is on (event_id) but Delivery has no unique fields: ` +
		`add ,unique to the tag of field EventID, or change the kind's unique key on purpose in a migration (the index and the kind's row in jobpipe_kinds)
  - the running-slots index "webhook_delivery_running_slots" makes (customer_id) the concurrency key but Delivery has no key: ` +
		`add ,key to the tag of field CustomerID, or change the kind's key on purpose in a migration (the index and the kind's row in jobpipe_kinds)
  - kind "webhook_delivery" is registered in jobpipe_kinds with unique_columns {event_id} and key_columns {customer_id}, but Delivery gives {} and {}: ` +
		`correct Delivery's tags, or change the kind on purpose in a migration that changes its table's indexes and runs ` +
		`UPDATE jobpipe_kinds SET unique_columns = '{}', key_columns = '{}' WHERE name = 'webhook_delivery'`
	if err == nil || err.Error() != want {
		t.Errorf("Start =\n%v\nwant\n%s", err, want)
	}
	var unique, key []string
	if err := b.db.QueryRow(context.Background(), `SELECT unique_columns, key_columns FROM jobpipe_kinds WHERE name = 'webhook_delivery'`).
		Scan(&unique, &key); err != nil {
		t.Fatal(err)
	}
	if len(unique) != 1 || unique[0] != "event_id" || len(key) != 1 || key[0] != "customer_id" {
		t.Errorf("registry after the refused Start: unique %v, key %v; want [event_id], [customer_id]", unique, key)
	}
}
