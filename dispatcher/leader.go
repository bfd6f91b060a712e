package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// maintenanceLease is the leader lease's name in jobpipe_leaders.
const maintenanceLease = "maintenance"

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

// lead runs maintenance while this node holds the leader lease: rescuing jobs whose lease expired.
// Every node tries each RescueInterval; the lease (LeaderTTL) lets one through. A leader that stalls
// past its lease is replaced, and what it does on waking is harmless: the rescue only touches rows
// whose lease has expired by the database's clock, and bumps their token so stale writers are fenced.
func (d *Dispatcher) lead(ctx context.Context) {
	t := time.NewTicker(d.cfg.RescueInterval)
	defer t.Stop()
	leading := false
	for {
		leading = d.takeLead(ctx, leading)
		if leading {
			d.rescueAll(ctx)
		}
		select {
		case <-ctx.Done():
			if leading {
				// Hand over at once rather than after LeaderTTL.
				c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, _ = d.cfg.DB.Exec(c, resignSQL, maintenanceLease, d.cfg.NodeName)
				cancel()
			}
			return
		case <-t.C:
		}
	}
}

func (d *Dispatcher) takeLead(ctx context.Context, was bool) bool {
	var holder string
	err := d.cfg.DB.QueryRow(ctx, takeLeadSQL, maintenanceLease, d.cfg.NodeName, d.cfg.LeaderTTL.Seconds()).Scan(&holder)
	leading := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) && ctx.Err() == nil {
		d.logger.Warn("dispatcher: leader election failed", "err", err)
	}
	if leading != was {
		d.logger.Info("dispatcher: maintenance leadership changed", "node", d.cfg.NodeName, "leading", leading)
	}
	return leading
}

// rescueAll makes jobs whose lease expired eligible again (or fails them after max attempts).
func (d *Dispatcher) rescueAll(ctx context.Context) {
	for _, k := range d.kinds {
		n, err := k.rescue(ctx)
		if err != nil && ctx.Err() == nil {
			d.logger.Warn("dispatcher: rescue failed", "kind", k.info.Name, "err", err)
		}
		if n > 0 {
			d.logger.Info("dispatcher: rescued jobs whose lease expired", "kind", k.info.Name, "jobs", n)
		}
	}
}

func (k *kindRunner) rescue(ctx context.Context) (int, error) {
	delays := make([]float64, k.info.MaxAttempts)
	for i := range delays {
		delays[i] = k.info.Backoff.Delay(i + 1).Seconds()
	}
	rows, err := k.d.cfg.DB.Query(ctx, k.sql.rescue, k.info.MaxAttempts, delays)
	if err != nil {
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
		k.d.stats.rescued.Add(1)
	}
	if n > 0 {
		k.signal()
	}
	return n, rows.Err()
}
