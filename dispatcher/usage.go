package dispatcher

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/kindsql"
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
	counts, keysAtLimit := kindsql.Usage(info, MaxKeysAtLimit)
	err = db.QueryRow(ctx, counts).Scan(&u.Running, &u.Remaining)
	if err != nil || len(info.Key) == 0 {
		return u, wrapUsage(info, err)
	}
	keyLimit := info.KeyLimit
	if stored.KeyLimit != nil {
		keyLimit = *stored.KeyLimit
	}
	rows, err := db.Query(ctx, keysAtLimit, info.Name, keyLimit)
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
