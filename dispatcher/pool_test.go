package dispatcher_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// smallPool opens a pool of maxConns connections to the test's schema and closes it at the end.
func smallPool(t *testing.T, b *runBundle, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg := b.db.Config()
	cfg.MaxConns = maxConns
	db, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

// RegisterTx handlers that outnumber the application's pool wait for a connection in turn; the
// dispatcher's heartbeats, on its own pool, keep every lease meanwhile.
func TestTxHandlersDoNotStarveHeartbeats(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	ctx := context.Background()
	kind := jobinfo.MustDefine[plainJob]("slowtx")
	createKind(t, b.db, kind)
	for i := range 8 {
		if _, err := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := b.cfg
	cfg.DB = smallPool(t, b, 4)
	cfg.LeaseTTL = 3 * time.Second // each handler outlives its first lease: only heartbeats keep it
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.RegisterTx(d, kind, func(ctx context.Context, tx pgx.Tx, j *dispatcher.Job[plainJob]) error {
			select {
			case <-time.After(4 * time.Second):
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			_, err := tx.Exec(ctx, `UPDATE slowtx SET note = 'done' WHERE id = $1`, j.ID)
			return err
		})
	})
	waitFor(t, "all processed", 60*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "slowtx", "processed_at IS NOT NULL OR failed_at IS NOT NULL") == 8, nil
	})
	if n := countWhere(t, b.db, "slowtx", "processed_at IS NOT NULL AND attempts_made = 1 AND note = 'done'"); n != 8 {
		t.Errorf("%d of 8 jobs processed on their first attempt with their write", n)
	}
	if s := d.Stats(); s.LeasesLost != 0 || s.Retried != 0 {
		t.Errorf("stats: %d leases lost, %d retries; want none", s.LeasesLost, s.Retried)
	}
}

// A configuration that cannot work is refused by New, saying what to set.
func TestConnConfigRefused(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	db := smallPool(t, b, 4)
	for _, tc := range []struct {
		name string
		cfg  dispatcher.Config
		want string
	}{
		{"own pool too small", dispatcher.Config{DB: db, DispatcherConns: 1},
			"dispatcher: Config.DispatcherConns is 1: the dispatcher needs at least 2 connections of its own (so that a heartbeat can run while a claim does); give 2 or more, or 0 for the default"},
		{"more tx handlers than connections", dispatcher.Config{DB: db, TxHandlerConns: 5},
			"dispatcher: Config.TxHandlerConns is 5: give 1 to Config.DB's MaxConns (4), or 0 for the default; to run more RegisterTx handlers at once, raise the pool's pool_max_conns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dispatcher.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}
