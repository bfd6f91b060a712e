package dispatcher

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jobpipe/jobpipe/prune"
)

// pruneLease names the lease in jobpipe_leaders that elects the pruner of a kind: per kind, as the
// rescuer's, since dispatchers may register different kinds.
func pruneLease(kind string) string { return "prune:" + kind }

// pruneLeases returns, for each kind this dispatcher prunes (Config.PruneInterval not negative, and a
// retention that is not forever), whether this node holds the kind's pruning lease. The leader loop
// renews the leases and sets the flags; prunePeriodically reads them.
func (l *leader) pruneLeases() map[string]*atomic.Bool {
	leases := map[string]*atomic.Bool{}
	if l.cfg.PruneInterval < 0 {
		return leases
	}
	for name, k := range l.kinds {
		if k.info.RetainProcessed > 0 || k.info.RetainFailed > 0 {
			leases[name] = new(atomic.Bool)
		}
	}
	return leases
}

// prunePeriodically prunes, every PruneInterval, each kind whose pruning lease this node holds. It runs
// apart from the rescuer, so that a long prune delays no rescue; a prune checks between batches that
// the lease is still held, and stops if it was lost.
func (l *leader) prunePeriodically(ctx context.Context, leading map[string]*atomic.Bool) {
	t := time.NewTicker(l.cfg.PruneInterval)
	defer t.Stop()
	kinds := slices.Sorted(maps.Keys(leading))
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, name := range kinds {
			if leading[name].Load() && ctx.Err() == nil {
				l.pruneKind(ctx, l.kinds[name], leading[name])
			}
		}
	}
}

// pruneKind deletes the kind's finished jobs past their retention.
func (l *leader) pruneKind(ctx context.Context, k *kindRunner, leading *atomic.Bool) {
	c, cancel := context.WithCancel(ctx)
	defer cancel()
	o := prune.Retention(k.info)
	o.Progress = func(prune.Progress) {
		if !leading.Load() {
			cancel()
		}
	}
	start := time.Now()
	res, err := prune.Run(c, l.db, k.info, o)
	l.stats.prunedProcessed.Add(res.Processed)
	l.stats.prunedFailed.Add(res.Failed)
	if err != nil && !errors.Is(err, context.Canceled) {
		l.logger.Warn("dispatcher: pruning failed", "kind", k.info.Name, "err", err)
	}
	if res.Processed+res.Failed > 0 {
		l.logger.Info("dispatcher: pruned finished jobs past their retention", "kind", k.info.Name,
			"processed", res.Processed, "failed", res.Failed, "batches", res.Batches, "took", time.Since(start))
	}
}
