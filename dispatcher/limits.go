package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// limitsTTL is how long a dispatcher trusts its copy of a kind's stored limits. A change notifies
// every dispatcher at once (limits.NotifyChannel); the TTL bounds how stale a copy can get when that
// notification is lost (LISTEN reconnecting, PollOnly).
const limitsTTL = time.Second

// kindLimits are the limits in force for a kind, from jobpipe_kind_limits over the kind's
// configuration. Per-key overrides are not here: the claim query reads them (jobpipe_key_limits), so
// they apply from the next claim pass.
type kindLimits struct {
	maxRunning *int // the kind's total across all dispatchers; nil: none
	keyLimit   int  // per-key default
	paused     bool
}

// halted reports whether no job of the kind may start.
func (l kindLimits) halted() bool {
	return l.paused || (l.maxRunning != nil && *l.maxRunning <= 0)
}

func (l kindLimits) equal(o kindLimits) bool {
	return fmtLimit(l.maxRunning) == fmtLimit(o.maxRunning) && l.keyLimit == o.keyLimit && l.paused == o.paused
}

const readKindLimitsSQL = `SELECT max_running, key_limit, paused FROM jobpipe_kind_limits WHERE kind = $1`

// currentLimits returns the kind's limits, read again when the copy is older than limitsTTL or a
// change was notified. Only the kind's producer calls it.
func (p *producer) currentLimits(ctx context.Context) (kindLimits, error) {
	stale := p.limitsStale.Swap(false)
	if !stale && !p.limitsRead.IsZero() && time.Since(p.limitsRead) < limitsTTL {
		return p.limits, nil
	}
	var maxRunning, keyLimit *int
	var paused bool
	err := p.sh.db.QueryRow(ctx, readKindLimitsSQL, p.info.Name).Scan(&maxRunning, &keyLimit, &paused)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		p.limitsStale.Store(true)
		return kindLimits{}, fmt.Errorf("dispatcher: reading the limits of %q: %w", p.info.Name, err)
	}
	l := kindLimits{maxRunning: maxRunning, keyLimit: p.info.KeyLimit, paused: paused}
	if keyLimit != nil && p.keyed {
		l.keyLimit = *keyLimit
	}
	if !l.equal(p.limits) {
		p.sh.logger.Info("dispatcher: limits in force", "kind", p.info.Name, "max_running", fmtLimit(l.maxRunning),
			"key_limit", l.keyLimit, "paused", l.paused)
	}
	p.limits, p.limitsRead = l, time.Now()
	p.hasTotal.Store(l.maxRunning != nil)
	return l, nil
}

// limitsChanged is called when a change of the kind's limits is notified.
func (k *kindRunner) limitsChanged() {
	k.limitsStale.Store(true)
	k.signal()
}

func fmtLimit(n *int) string {
	if n == nil {
		return "none"
	}
	return fmt.Sprint(*n)
}

// budget takes the kind's claim lock (its row in jobpipe_kind_limits, FOR NO KEY UPDATE) and returns
// how many more of its jobs may start under its total limit, at most n. Every dispatcher claiming a
// kind with a total limit takes the lock first, so their counts and claims follow one another: the
// count, read after the lock is granted, sees every claim committed before. That makes the total
// exact without Redis. Without a stored row there is no total (it was cleared meanwhile).
func (p *producer) budget(ctx context.Context, tx pgx.Tx, n int) (int, error) {
	b := &pgx.Batch{}
	var maxRunning *int
	var paused bool
	b.Queue(`SELECT max_running, paused FROM jobpipe_kind_limits WHERE kind = $1 FOR NO KEY UPDATE`, p.info.Name).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				if err := rows.Scan(&maxRunning, &paused); err != nil {
					return err
				}
			}
			return rows.Err()
		})
	var running int
	b.Queue(p.sql.countRunning).QueryRow(func(r pgx.Row) error { return r.Scan(&running) })
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("dispatcher: reading the running total of %q: %w", p.info.Name, err)
	}
	switch {
	case paused:
		return 0, nil
	case maxRunning == nil:
		return n, nil
	}
	return max(0, min(n, *maxRunning-running)), nil
}
