package dispatcher_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/internal/heads"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// planCounts are how many times the prepared statements of one kind were planned, on every
// connection of the dispatcher's pool.
type planCounts struct{ generic, custom int64 }

// A keyed kind's claim transaction plans its heads statements once per connection, and the slots read
// and the claim as the session does: after a dispatcher has worked a keyed kind, its connections hold
// the heads statements with generic plans only, and the slots read and the claim with custom plans,
// which a prepared statement gets in the default mode for its first five executions at least and
// never when plans are forced generic.
func TestKeyedClaimPlansItsHeadsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("post_sync", jobinfo.KeyLimit(2))
	createKind(t, b.db, kind)
	enqueueSeqMajor(t, b, kind, 10, 6)
	fast, scan := heads.Queries(kind.Info())
	var heads, slots, claims planCounts
	var mu sync.Mutex
	// The dispatcher's connections are its own pool's, opened with Config.DB's settings: read what they
	// planned as the pool closes them, at Stop.
	poolCfg := b.db.Config()
	poolCfg.BeforeClose = func(c *pgx.Conn) {
		mu.Lock()
		defer mu.Unlock()
		// A connection that broke before it was closed has nothing left to read.
		if err := addPlanCounts(ctx, c, fast, scan, &heads, &slots, &claims); err != nil {
			t.Logf("a connection's plans were not read: %v", err)
		}
	}
	db, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg := b.cfg
	cfg.DB = db
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(context.Context, *dispatcher.Job[postSync]) error { return nil })
	})
	waitFor(t, "all processed", 20*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "post_sync", "processed_at IS NOT NULL") == 60, nil
	})
	stopNow(t, d)
	mu.Lock()
	defer mu.Unlock()
	if heads.generic == 0 || heads.custom != 0 {
		t.Errorf("heads statements planned %d times generic, %d custom; want generic only", heads.generic, heads.custom)
	}
	if slots.custom == 0 || claims.custom == 0 {
		t.Errorf("slots reads planned %+v, claims %+v; want custom plans for both (the session's mode)", slots, claims)
	}
	t.Logf("plans: heads %+v, slots reads %+v, claims %+v", heads, slots, claims)
}

// addPlanCounts adds the plans of c's prepared statements to the counts of the statement they are.
func addPlanCounts(ctx context.Context, c *pgx.Conn, fast, scan string, heads, slots, claims *planCounts) error {
	rows, err := c.Query(ctx, "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
	if err != nil {
		return err
	}
	defer rows.Close()
	var stmt string
	var generic, custom int64
	for rows.Next() {
		if err := rows.Scan(&stmt, &generic, &custom); err != nil {
			return err
		}
		var p *planCounts
		switch {
		case stmt == fast || stmt == scan:
			p = heads
		case strings.HasPrefix(stmt, "SELECT t.id, coalesce((SELECT array_agg(e.lock_slot)"):
			p = slots
		case strings.HasPrefix(stmt, "WITH u AS (") && strings.Contains(stmt, "UPDATE "):
			p = claims
		default:
			continue
		}
		p.generic, p.custom = p.generic+generic, p.custom+custom
	}
	return rows.Err()
}
