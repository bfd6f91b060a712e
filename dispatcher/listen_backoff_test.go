package dispatcher_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// The LISTEN connection, lost again and again over a dispatcher's life (server restarts, a pooler
// or an operator ending sessions), comes back within moments each time: the wait before
// reconnecting grows while connecting fails, and starts over once a connection has worked. Were it
// to keep growing, every loss after the first few would leave the dispatcher without notifications
// for 5 s. Only this test's sessions are ended: its pool names them with its own application_name.
func TestListenReconnectsPromptlyAfterEveryLoss(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	ctx := context.Background()
	app := fmt.Sprintf("jobpipe_listen_%d", time.Now().UnixNano())
	cfg := b.db.Config()
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after the dispatcher has stopped: cleanups run last first
	kind := jobinfo.MustDefine[plainJob]("listen_backoff")
	createKind(t, b.db, kind)
	c := b.cfg
	c.DB = pool
	b.start(t, c, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(context.Context, *dispatcher.Job[plainJob]) error { return nil })
	})

	listener := func() (pid int) {
		err := b.db.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE application_name = $1 AND query LIKE 'LISTEN %'`, app).Scan(&pid)
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	var pid int
	waitFor(t, "the dispatcher's LISTEN connection", 10*time.Second, func() (bool, error) { pid = listener(); return pid != 0, nil })
	for loss := 1; loss <= 8; loss++ {
		if _, err := b.db.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
		lost := time.Now()
		old := pid
		waitFor(t, "the LISTEN connection to come back", 10*time.Second, func() (bool, error) {
			pid = listener()
			return pid != 0 && pid != old, nil
		})
		if took := time.Since(lost); took > time.Second {
			t.Errorf("after loss %d the LISTEN connection came back in %v; want under a second", loss, took.Round(time.Millisecond))
		}
	}
}
