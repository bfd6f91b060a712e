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
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
)

// Locker takes queue and execution locks on a quorum of Redis nodes. It is safe for concurrent
// use; the Locks it returns are each safe for concurrent use too.
type Locker struct {
	cfg     Config
	rs      *redsync.Redsync
	quorum  int
	janitor *janitor
	stats   counters
	// queueOpts and execOpts are the redsync Mutex options of each lock type, made once: a
	// Mutex is made per lock call.
	queueOpts, execOpts []redsync.Option
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
	l := &Locker{cfg: c, quorum: len(c.Nodes)/2 + 1, janitor: newJanitor(c.Nodes, c.CallTimeout)}
	pools := make([]rsredis.Pool, len(c.Nodes))
	for i, n := range c.Nodes {
		n.AddHook(callHook{locker: l, node: i})
		pools[i] = goredis.NewPool(n)
	}
	l.rs = redsync.New(pools...)
	l.queueOpts, l.execOpts = l.mutexOptions(c.QueueTTL), l.mutexOptions(c.ExecTTL)
	return l, nil
}

// mutexOptions returns the options of a redsync Mutex whose lock lives ttl. Pools are not
// shuffled (WithShufflePools): the node numbers in redsync's errors must be Config.Nodes indexes.
func (l *Locker) mutexOptions(ttl time.Duration) []redsync.Option {
	return []redsync.Option{
		redsync.WithExpiry(ttl),
		redsync.WithTries(1),
		redsync.WithFailFast(true),
		// redsync bounds each round of an acquire by expiry × timeout factor: make it CallTimeout.
		redsync.WithTimeoutFactor(float64(l.cfg.CallTimeout) / float64(ttl)),
	}
}

// Close stops the Locker's janitor: the compare-and-deletes still waiting for a node that does
// not answer, or for their confirmation (see the package documentation), which otherwise go on
// until the node answers, for at most 10 minutes, or until the clients are closed. Locks keep
// working after Close, but what a failed call leaves behind then expires by its TTL. Call it after
// the last lock call, before closing the clients; a second Close does nothing.
func (l *Locker) Close() { l.janitor.close() }

// Quorum returns how many nodes must agree for a lock to be held: a majority of Config.Nodes.
func (l *Locker) Quorum() int { return l.quorum }

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
	value, err := l.newValue()
	if err != nil {
		return nil, err
	}
	ttl, opts := l.cfg.ExecTTL, l.execOpts
	if typ == queueLock {
		ttl, opts = l.cfg.QueueTTL, l.queueOpts
	}
	m := l.rs.NewMutex(name, append(slices.Clip(opts),
		redsync.WithGenValueFunc(func() (string, error) { return value, nil }))...)
	// The whole call, including redsync's clean-up round after a failed attempt.
	track := newLockTrack(len(l.cfg.Nodes))
	callCtx, cancel := l.callContext(ctx, track, true)
	defer cancel()
	if err := m.TryLockContext(callCtx); err != nil {
		// redsync's clean-up round does not say where it deleted, and its delete can pass the
		// attempt's own SET NX on a stalled node: the janitor deletes our value wherever the
		// attempt may have left it, once the call's commands have ended.
		deadline, _ := callCtx.Deadline()
		l.janitor.add(tallyOf(err).untaken(len(l.cfg.Nodes)), name, value, deadline)
		return nil, l.acquireError(ctx, name, err)
	}
	l.stats.acquired.Add(1)
	return newLock(l, m, track, typ, slot, ttl), nil
}

// acquireError translates redsync's answer to a failed attempt.
func (l *Locker) acquireError(ctx context.Context, name string, err error) error {
	var taken *redsync.ErrTaken
	if errors.As(err, &taken) {
		l.stats.taken.Add(1)
		return fmt.Errorf("%w: %s: %w", ErrTaken, name, err)
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("execlock: acquire %s: %w", name, cerr)
	}
	l.stats.unavailable.Add(1)
	if errors.Is(err, redsync.ErrFailed) {
		// A quorum answered, but too late for the lock to be valid when the call returned.
		return fmt.Errorf("%w: acquire %s: quorum reached too slowly: %w", ErrUnavailable, name, err)
	}
	return fmt.Errorf("%w: acquire %s: %w", ErrUnavailable, name, err)
}

// newValue returns a lock value: the node name and 128 random bits, so that a key found in Redis
// tells who holds it and no two holders ever share a value.
func (l *Locker) newValue() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("execlock: random lock value: %w", err)
	}
	return l.cfg.NodeName + ":" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Ping checks that a quorum of nodes answers PING within CallTimeout. It returns nil, or an error
// wrapping ErrUnavailable and every failing node's error.
func (l *Locker) Ping(ctx context.Context) error {
	var failed []error
	for i, err := range l.PingNodes(ctx) {
		if err != nil {
			failed = append(failed, fmt.Errorf("node #%d (%s): %w", i, l.cfg.Nodes[i].Options().Addr, err))
		}
	}
	if len(l.cfg.Nodes)-len(failed) < l.quorum {
		return fmt.Errorf("%w: %d of %d nodes answered, quorum is %d: %w",
			ErrUnavailable, len(l.cfg.Nodes)-len(failed), len(l.cfg.Nodes), l.quorum, errors.Join(failed...))
	}
	return nil
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
