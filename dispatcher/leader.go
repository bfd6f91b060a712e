package dispatcher

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// rescueLease names the lease in jobpipe_leaders that elects the rescuer of a kind. The lease is per
// kind because dispatchers may register different kinds: each kind's rescuer is one of the dispatchers
// that run it.
func rescueLease(kind string) string { return "rescue:" + kind }

const (
	// takeLeadSQL renews this node's lease, or takes an expired one; it returns a row when this node
	// leads. Times are the database's, so clocks of the nodes do not matter.
	takeLeadSQL = `INSERT INTO jobpipe_leaders (name, holder, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3))
ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at,
	elected_at = CASE WHEN jobpipe_leaders.holder = EXCLUDED.holder THEN jobpipe_leaders.elected_at ELSE now() END
WHERE jobpipe_leaders.holder = EXCLUDED.holder OR jobpipe_leaders.expires_at < now()
RETURNING holder`
	resignSQL = `DELETE FROM jobpipe_leaders WHERE name = $1 AND holder = $2`
)

// leader does the work one node does for all, each part elected through its own lease: the rescue
// of expired leases, the schedules and the pruner. Its goroutine (run) starts the schedules' and the
// pruner's loops and waits for them.
type leader struct {
	*shared
	kinds     map[string]*kindRunner     // read-only
	schedules map[string]*scheduleRunner // read-only
}

// run does the leader-only maintenance: the rescuer of each registered kind whose lease this node
// holds, in this loop; and, in loops of their own, the schedules (leadSchedules, which must fire on
// time) and the pruner (prunePeriodically, whose runs may be long). Each is elected per kind or per
// schedule through its own lease in jobpipe_leaders.
//
// Every node tries each RescueInterval; the lease (LeaderTTL) lets one through per kind. A leader
// that stalls past its lease is replaced, and what it does on waking is harmless: the rescue only
// touches rows whose lease has expired by the database's clock, and bumps their token so stale
// writers are fenced; a prune re-checks each row it deletes; a schedule round locks the schedule's row.
// The leader rescues only once this node has reached the database for a while (the gate: reach.go).
func (l *leader) run(ctx context.Context) {
	gate := newRescueGate(l.cfg.rescueQuiet(), time.Now())
	pruning := l.pruneLeases()
	var wg sync.WaitGroup
	defer wg.Wait()
	if len(l.schedules) > 0 {
		wg.Go(func() { l.leadSchedules(ctx) })
	}
	if len(pruning) > 0 {
		wg.Go(func() { l.prunePeriodically(ctx, pruning) })
	}
	t := time.NewTicker(l.cfg.RescueInterval)
	defer t.Stop()
	leading := map[string]bool{}
	for {
		// Statements run to completion even when Stop comes meanwhile: a lease renewal cancelled on
		// the client may still commit on the server after the resignation below, leaving a lease
		// behind. LeaderTTL bounds them.
		round, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.LeaderTTL)
		for name, k := range l.kinds {
			leading[name] = l.takeLead(round, rescueLease(name), leading[name])
			if leading[name] && gate.open(time.Now(), l.unreachableAt.Load()) {
				l.rescueKind(round, k)
			}
			if p := pruning[name]; p != nil {
				p.Store(l.takeLead(round, pruneLease(name), p.Load()))
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			// Hand over at once rather than after LeaderTTL. Every kind's lease, not only those known to be
			// held: a renewal that timed out may have been committed all the same.
			c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			for name := range l.kinds {
				_, _ = l.db.Exec(c, resignSQL, rescueLease(name), l.cfg.NodeName)
				if p := pruning[name]; p != nil {
					p.Store(false)
					_, _ = l.db.Exec(c, resignSQL, pruneLease(name), l.cfg.NodeName)
				}
			}
			cancel()
			return
		case <-t.C:
		}
	}
}

func (l *leader) takeLead(ctx context.Context, lease string, was bool) bool {
	var holder string
	sent := time.Now()
	err := l.db.QueryRow(ctx, takeLeadSQL, lease, l.cfg.NodeName, l.cfg.LeaderTTL.Seconds()).Scan(&holder)
	leading := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		l.noteReach(err)
		if ctx.Err() == nil {
			l.logger.Warn("dispatcher: leader election failed", "lease", lease, "err", err)
		}
	} else if time.Since(sent) > l.cfg.HeartbeatInterval {
		// Answered, but after renewals sent meanwhile timed out: as good as unreachable (reach.go).
		l.unreachableAt.Store(time.Now().UnixNano())
	}
	if leading != was {
		l.logger.Info("dispatcher: leadership changed", "lease", lease, "node", l.cfg.NodeName, "leading", leading)
	}
	return leading
}

// rescueKind makes the kind's jobs whose lease expired eligible again (or fails them after max
// attempts).
func (l *leader) rescueKind(ctx context.Context, k *kindRunner) {
	n, err := k.rescue(ctx)
	if err != nil && ctx.Err() == nil {
		l.logger.Warn("dispatcher: rescue failed", "kind", k.info.Name, "err", err)
	}
	if n > 0 {
		l.logger.Info("dispatcher: rescued jobs whose lease expired", "kind", k.info.Name, "jobs", n)
	}
}

func (k *kindRunner) rescue(ctx context.Context) (int, error) {
	delays := make([]float64, k.info.MaxAttempts)
	for i := range delays {
		delays[i] = k.info.Backoff.Delay(i + 1).Seconds()
	}
	// Planned each time, as the finish statement is (see runFinish): a plan kept from when the table
	// was empty would read the whole table on each pass.
	rows, err := k.sh.db.Query(ctx, k.sql.rescue, pgx.QueryExecModeExec, k.info.MaxAttempts, delays, k.sh.cfg.rescueQuiet().Seconds())
	if err != nil {
		k.sh.noteReach(err)
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		var failed bool
		if err := rows.Scan(&id, &failed); err != nil {
			return n, err
		}
		n++
		k.sh.stats.rescued.Add(1)
	}
	k.observeRescued(n)
	if n > 0 {
		k.signal()
	}
	return n, rows.Err()
}
