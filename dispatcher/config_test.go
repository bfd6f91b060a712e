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
	_, err := dispatcher.New(dispatcher.Config{Redis: two, Concurrency: -1, LeaseTTL: time.Second, HeartbeatInterval: 900 * time.Millisecond,
		RescueInterval: time.Minute, LeaderTTL: 15 * time.Second, HandlerGrace: -time.Second})
	if err == nil {
		t.Fatal("New accepted a bad config")
	}
	for _, want := range []string{
		"dispatcher: Config.DB is nil: pass a *pgxpool.Pool",
		"dispatcher: Config.Redis has 2 nodes: Redlock needs an odd number (1, 3 or 5) of independent nodes",
		"dispatcher: Config.Concurrency is -1: give 1 or more",
		"dispatcher: Config.HeartbeatInterval 900ms must be positive and at most half of LeaseTTL (1s)",
		"dispatcher: Config.RescueInterval 1m0s must be positive and shorter than LeaderTTL 15s",
		"dispatcher: Config.HandlerGrace -1s is negative: give how long a handler whose context ended may take to return (default 5s)",
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
