package execlock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
)

// Locker takes queue and execution locks on a quorum of Redis nodes. It is safe for concurrent
// use, and so are the Locks it returns.
type Locker struct {
	cfg     Config
	rs      *redsync.Redsync
	janitor *janitor
	stats   struct {
		acquired, taken, unavailable, extended, extendFailed, released, releaseFailed atomic.Uint64
	}
}

// New returns a Locker for cfg, after applying defaults and validating it. Errors wrap
// ErrInvalid. The Locker does not take ownership of cfg.Nodes; it adds a hook to each client that
// changes nothing for commands other than its own (see Config.Nodes).
func New(cfg *Config) (*Locker, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%w: nil Config", ErrInvalid)
	}
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	c.Nodes = slices.Clone(c.Nodes) // the caller may reuse its slice
	l := &Locker{cfg: c, janitor: newJanitor(c.Nodes, c.CallTimeout)}
	pools := make([]rsredis.Pool, len(c.Nodes))
	for i, n := range c.Nodes {
		n.AddHook(callHook{locker: l, node: i})
		pools[i] = goredis.NewPool(n)
	}
	l.rs = redsync.New(pools...)
	return l, nil
}

// Close stops the Locker's janitor: the compare-and-deletes still waiting for a node that does
// not answer, or for their confirmation (see the package documentation), which otherwise go on
// until the node answers, for at most 10 minutes, or until the clients are closed. Locks keep
// working after Close, but what a failed call leaves behind then expires by its TTL. Call it after
// the last lock call, before closing the clients; a second Close does nothing.
func (l *Locker) Close() { l.janitor.close() }

// Quorum returns how many nodes must agree for a lock to be held: a majority of Config.Nodes.
func (l *Locker) Quorum() int { return len(l.cfg.Nodes)/2 + 1 }

// TryQueue makes one attempt at the queue lock of (kind, key, slot), which a dispatcher holds
// while it hands a job to a worker. It returns an error wrapping ErrTaken when another holder
// has it, ErrUnavailable when a quorum of nodes did not answer in time, the context's error when
// ctx ended, or ErrInvalid for a bad kind or slot. It never waits for a busy lock: one attempt.
func (l *Locker) TryQueue(ctx context.Context, kind, key string, slot int) (*Lock, error) {
	return l.try(ctx, queueLock, kind, key, slot)
}

// TryExec makes one attempt at the execution lock of (kind, key, slot), which a worker holds
// while the job runs; it lives Config.ExecTTL unless extended. Errors are as for TryQueue.
func (l *Locker) TryExec(ctx context.Context, kind, key string, slot int) (*Lock, error) {
	return l.try(ctx, execLock, kind, key, slot)
}

// TryQueueSlot takes the queue lock of one free slot of (kind, key) among slots 0 to limit-1:
// see TryExecSlot.
func (l *Locker) TryQueueSlot(ctx context.Context, kind, key string, limit int, busy ...int) (*Lock, error) {
	return l.trySlot(ctx, queueLock, kind, key, limit, busy)
}

// TryExecSlot takes the execution lock of one free slot of (kind, key) among slots 0 to limit-1,
// where limit is the key's running limit (1 to MaxLimit). It tries the slots in a random order,
// one attempt each, and returns the first lock it gets; Lock.Slot tells which, and
// Lock.FailedAttempts how many slots it found taken first. Slots listed in busy (for example the
// slots of the key's running rows in the database) are not tried. When every slot is taken the
// error wraps ErrTaken; the first ErrUnavailable or context error ends the search, since the
// other slots live on the same nodes.
func (l *Locker) TryExecSlot(ctx context.Context, kind, key string, limit int, busy ...int) (*Lock, error) {
	return l.trySlot(ctx, execLock, kind, key, limit, busy)
}

func (l *Locker) trySlot(ctx context.Context, typ lockType, kind, key string, limit int, busy []int) (*Lock, error) {
	if limit < 1 || limit > MaxLimit {
		return nil, fmt.Errorf("%w limit %d: want 1 to %d", ErrInvalid, limit, MaxLimit)
	}
	base, err := keyBase(l.cfg.Prefix, typ, kind, key)
	if err != nil {
		return nil, err
	}
	skip := make([]bool, limit)
	for _, s := range busy {
		if s >= 0 && s < limit {
			skip[s] = true
		}
	}
	failed := 0
	for _, slot := range mrand.Perm(limit) {
		if skip[slot] {
			continue
		}
		lk, err := l.try(ctx, typ, kind, key, slot)
		if err == nil {
			lk.failed = failed
			return lk, nil
		}
		if !errors.Is(err, ErrTaken) {
			return nil, err
		}
		failed++
	}
	return nil, fmt.Errorf("%w: all %d slots of %s* busy (%d taken, %d skipped)",
		ErrTaken, limit, base, failed, limit-failed)
}

// try makes one attempt at one lock.
func (l *Locker) try(ctx context.Context, typ lockType, kind, key string, slot int) (*Lock, error) {
	name, err := lockKey(l.cfg.Prefix, typ, kind, key, slot)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("execlock: acquire %s: %w", name, err)
	}
	// The node name and 128 random bits: a key found in Redis tells who holds it, and no two
	// holders ever share a value.
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("execlock: random lock value: %w", err)
	}
	value := l.cfg.NodeName + ":" + base64.RawURLEncoding.EncodeToString(b[:])
	ttl := l.cfg.ExecTTL
	if typ == queueLock {
		ttl = l.cfg.QueueTTL
	}
	// TryLockContext makes one attempt, each of whose rounds redsync bounds by expiry × timeout
	// factor: CallTimeout. Pools are not shuffled (WithShufflePools), so that the node numbers in
	// redsync's errors are Config.Nodes indexes.
	m := l.rs.NewMutex(name, redsync.WithExpiry(ttl), redsync.WithFailFast(true),
		redsync.WithTimeoutFactor(float64(l.cfg.CallTimeout)/float64(ttl)),
		redsync.WithGenValueFunc(func() (string, error) { return value, nil }))
	track := newLockTrack(len(l.cfg.Nodes))
	callCtx, cancel := l.callContext(ctx, track, true) // also covers redsync's clean-up round
	defer cancel()
	err = m.TryLockContext(callCtx)
	if err == nil {
		l.stats.acquired.Add(1)
		k := &Lock{locker: l, slot: slot, m: m, track: track}
		k.until.Store(new(m.Until()))
		return k, nil
	}
	// redsync's clean-up round does not say where it deleted, and its delete can pass the
	// attempt's own SET NX on a stalled node: the janitor deletes our value wherever the attempt
	// may have left it, once the call's commands have ended.
	deadline, _ := callCtx.Deadline()
	l.janitor.add(tallyOf(err).untaken(len(l.cfg.Nodes)), name, value, deadline)
	var taken *redsync.ErrTaken
	switch {
	case errors.As(err, &taken):
		l.stats.taken.Add(1)
		return nil, fmt.Errorf("%w: %s: %w", ErrTaken, name, err)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("execlock: acquire %s: %w", name, ctx.Err())
	}
	l.stats.unavailable.Add(1)
	if errors.Is(err, redsync.ErrFailed) {
		// A quorum answered, but too late for the lock to be valid when the call returned.
		return nil, fmt.Errorf("%w: acquire %s: quorum reached too slowly: %w", ErrUnavailable, name, err)
	}
	return nil, fmt.Errorf("%w: acquire %s: %w", ErrUnavailable, name, err)
}

// PingNodes sends PING to every node at once and returns each node's answer, in Config.Nodes
// order: nil when it answered, else its error. The whole call takes at most CallTimeout, or until
// ctx ends if that is sooner.
func (l *Locker) PingNodes(ctx context.Context) []error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.CallTimeout)
	defer cancel()
	errs := make([]error, len(l.cfg.Nodes))
	var wg sync.WaitGroup
	for i, c := range l.cfg.Nodes {
		wg.Go(func() { errs[i] = c.Ping(ctx).Err() })
	}
	wg.Wait()
	return errs
}

// Stats counts a Locker's lock calls since it was created, for metrics. Every field only grows.
// "Failed lock attempts" are Taken + Unavailable.
type Stats struct {
	Acquired uint64 // attempts that got their lock
	// Taken counts attempts refused because another holder had the lock (contention). A
	// TryExecSlot or TryQueueSlot call adds one per slot it found taken.
	Taken         uint64
	Unavailable   uint64 // attempts that failed because a quorum of nodes did not answer in time
	Extended      uint64 // successful extensions
	ExtendFailed  uint64 // extensions that returned ErrLost
	Released      uint64 // locks released on a quorum
	ReleaseFailed uint64 // releases that found the lock lost or the nodes unavailable
}

// Stats returns a snapshot of the Locker's counters. Attempts ended by their context, and
// invalid arguments, are not counted.
func (l *Locker) Stats() Stats {
	c := &l.stats
	return Stats{Acquired: c.acquired.Load(), Taken: c.taken.Load(), Unavailable: c.unavailable.Load(),
		Extended: c.extended.Load(), ExtendFailed: c.extendFailed.Load(), Released: c.released.Load(),
		ReleaseFailed: c.releaseFailed.Load()}
}
