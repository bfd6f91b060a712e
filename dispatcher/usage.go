package dispatcher

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/states"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
)

// Usage is a kind's load against its limits at one moment: what metrics export as gauges.
type Usage struct {
	// Kind is the kind's name.
	Kind string
	// Running counts the jobs running now (holding a lease), across all dispatchers.
	Running int
	// MaxRunning is the kind's total limit in force: 0 when paused, limits.Unlimited when none.
	MaxRunning int
	// Remaining counts the jobs not started or waiting to run again: due, scheduled and retrying.
	Remaining int
	// KeysAtLimit lists the keys running as many jobs as their limit allows, or more (after the limit
	// was lowered), most running first, at most MaxKeysAtLimit of them. Empty for kinds without a key.
	KeysAtLimit []KeyUsage
}

// KeyUsage is one key's running jobs against its limit.
type KeyUsage struct {
	// Key is the key value, as the kind's key text (see package limits).
	Key string
	// Running counts the key's running jobs.
	Running int
	// Limit is the key's limit in force: its override, else the kind's per-key limit; 0 when paused.
	Limit int
}

// MaxKeysAtLimit bounds Usage.KeysAtLimit, so that a metrics scrape stays small whatever the number
// of keys.
const MaxKeysAtLimit = 100

// ReadUsage reads the kind's usage: two index counts and, for a keyed kind, one pass over its running
// jobs. The kind's configured key limit (jobinfo.KeyLimit) applies where nothing is stored.
func ReadUsage(ctx context.Context, db jobinfo.DB, info *jobinfo.Info) (Usage, error) {
	stored, err := limits.Get(ctx, db, info.Name)
	if err != nil {
		return Usage{}, fmt.Errorf("dispatcher: usage of %q: %w", info.Name, err)
	}
	u := Usage{Kind: info.Name, MaxRunning: stored.EffectiveMaxRunning()}
	table := info.Table.Sanitize()
	err = db.QueryRow(ctx, fmt.Sprintf(`SELECT (SELECT count(*) FROM %[1]s t WHERE %[2]s), (SELECT count(*) FROM %[1]s t WHERE %[3]s)`,
		table, states.Running("t"), states.Waiting("t"))).Scan(&u.Running, &u.Remaining)
	if err != nil || len(info.Key) == 0 {
		return u, wrapUsage(info, err)
	}
	keyLimit := info.KeyLimit
	if stored.KeyLimit != nil {
		keyLimit = *stored.KeyLimit
	}
	rows, err := db.Query(ctx, fmt.Sprintf(`SELECT r.key, r.n, x.lim FROM (
	SELECT %[1]s AS key, count(*) AS n FROM %[2]s t WHERE %[3]s GROUP BY 1) r
CROSS JOIN LATERAL (SELECT coalesce((SELECT CASE WHEN l.paused THEN 0 ELSE coalesce(l.key_limit, $2) END
	FROM jobpipe_key_limits l WHERE l.kind = $1 AND l.key_value = r.key), $2) AS lim) x
WHERE r.n >= x.lim
ORDER BY r.n DESC, r.key LIMIT %[4]d`, info.KeyText("t"), table, states.Running("t"), MaxKeysAtLimit), info.Name, keyLimit)
	if err != nil {
		return u, wrapUsage(info, err)
	}
	u.KeysAtLimit, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (KeyUsage, error) {
		var k KeyUsage
		err := r.Scan(&k.Key, &k.Running, &k.Limit)
		return k, err
	})
	return u, wrapUsage(info, err)
}

func wrapUsage(info *jobinfo.Info, err error) error {
	if err != nil {
		return fmt.Errorf("dispatcher: usage of %q: %w", info.Name, err)
	}
	return nil
}
