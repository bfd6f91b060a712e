package execlock

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
)

// Locker takes queue and execution locks on a quorum of Redis nodes. It is safe for concurrent
// use, and so are the Locks it returns.
type Locker struct {
	cfg     Config
	rs      *redsync.Redsync
	wires   []*wire // by node
	janitor *janitor
	stats   struct{ acquired, taken, unavailable, extended, extendFailed, released, releaseFailed atomic.Uint64 }
}

// New returns a Locker for cfg, after applying defaults and validating it; errors wrap ErrInvalid.
func New(cfg *Config) (*Locker, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%w: nil Config", ErrInvalid)
	}
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	l := &Locker{cfg: c, janitor: &janitor{nodes: c.Nodes, interval: c.CallTimeout, kick: make(chan struct{}, 1)}}
	pools := make([]rsredis.Pool, len(c.Nodes))
	for i, n := range c.Nodes {
		l.wires = append(l.wires, &wire{client: n})
		pools[i] = nodePool{locker: l, node: i}
	}
	l.rs = redsync.New(pools...)
	return l, nil
}

// Close ends the Locker's background deletes of values that lock calls may have left on some nodes
// (see the package documentation): it sends those still pending once more and waits for them, at most
// three times Config.CallTimeout; what is left expires by its TTL. Call it after the last lock call
// and before closing the clients; a second Close does nothing.
func (l *Locker) Close() { l.janitor.close() }

// Quorum returns how many nodes must agree for a lock to be held: a majority of Config.Nodes.
func (l *Locker) Quorum() int { return len(l.cfg.Nodes)/2 + 1 }

// TryQueue makes one attempt at the queue lock of (kind, key, slot), which a dispatcher holds
// while it hands a job to a worker. Its error wraps ErrTaken when another holder has the lock,
// ErrUnavailable when a quorum of nodes did not answer in time, ctx's error, or ErrInvalid.
func (l *Locker) TryQueue(ctx context.Context, kind, key string, slot int) (*Lock, error) {
	return l.try(ctx, queueLock, kind, key, slot)
}

// TryExec makes one attempt at the execution lock of (kind, key, slot), which a worker holds
// while the job runs. Errors are as for TryQueue.
func (l *Locker) TryExec(ctx context.Context, kind, key string, slot int) (*Lock, error) {
	return l.try(ctx, execLock, kind, key, slot)
}

// TryQueueSlot is TryExecSlot for a queue lock.
func (l *Locker) TryQueueSlot(ctx context.Context, kind, key string, limit int, busy ...int) (*Lock, error) {
	return l.trySlot(ctx, queueLock, kind, key, limit, busy)
}

// TryExecSlot takes the execution lock of a free slot of (kind, key) among slots 0 to limit-1
// (limit is 1 to MaxLimit), tried in a random order but for those in busy: Lock.Slot tells which,
// Lock.FailedAttempts how many it found taken first. When all are taken the error wraps ErrTaken;
// an ErrUnavailable or context error ends the search, since every slot lives on the same nodes.
func (l *Locker) TryExecSlot(ctx context.Context, kind, key string, limit int, busy ...int) (*Lock, error) {
	return l.trySlot(ctx, execLock, kind, key, limit, busy)
}

func (l *Locker) trySlot(ctx context.Context, typ lockType, kind, key string, limit int, busy []int) (*Lock, error) {
	if limit < 1 || limit > MaxLimit {
		return nil, fmt.Errorf("%w limit %d: want 1 to %d", ErrInvalid, limit, MaxLimit)
	}
	first, err := lockKey(l.cfg.Prefix, typ, kind, key, 0) // checks kind before any slot is tried
	if err != nil {
		return nil, err
	}
	failed := 0
	for _, slot := range mrand.Perm(limit) {
		if slices.Contains(busy, slot) {
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
		ErrTaken, limit, strings.TrimSuffix(first, "0"), failed, limit-failed)
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
	value := l.cfg.NodeName + ":" + rand.Text() // no two holders share a value
	ttl := l.cfg.ExecTTL
	if typ == queueLock {
		ttl = l.cfg.QueueTTL
	}
	// redsync bounds each round of an attempt by expiry × timeout factor: CallTimeout. Pools are
	// not shuffled (WithShufflePools): the node numbers in redsync's errors are Config.Nodes indexes.
	m := l.rs.NewMutex(name, redsync.WithExpiry(ttl), redsync.WithFailFast(true),
		redsync.WithTimeoutFactor(float64(l.cfg.CallTimeout)/float64(ttl)),
		redsync.WithGenValueFunc(func() (string, error) { return value, nil }))
	track := make(lockTrack, len(l.cfg.Nodes))
	for i := range track {
		track[i] = nodeTrack{turn: make(chan struct{}, 1), ended: make(chan struct{})}
	}
	callCtx, cancel := l.callContext(ctx, track, true) // also covers redsync's clean-up round
	defer cancel()
	err = m.TryLockContext(callCtx)
	if err == nil {
		l.stats.acquired.Add(1)
		k := &Lock{locker: l, slot: slot, m: m, track: track}
		k.until.Store(new(m.Until()))
		return k, nil
	}
	// redsync's clean-up round does not say where it deleted, and its delete can pass the attempt's
	// own SET NX on a stalled node: the janitor deletes our value wherever the attempt may have left it.
	deadline, _ := callCtx.Deadline()
	l.janitor.add(tallyOf(err).untaken(len(l.cfg.Nodes)), name, value, deadline, track)
	var taken *redsync.ErrTaken
	switch {
	case errors.As(err, &taken):
		l.stats.taken.Add(1)
		return nil, fmt.Errorf("%w: %s: %w", ErrTaken, name, err)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("execlock: acquire %s: %w", name, ctx.Err())
	case errors.Is(err, redsync.ErrFailed): // a quorum answered, but too late for the lock to be valid
		err = fmt.Errorf("quorum reached too slowly: %w", err)
	}
	l.stats.unavailable.Add(1)
	return nil, fmt.Errorf("%w: acquire %s: %w", ErrUnavailable, name, err)
}

// lockType tells a queue lock from an execution lock; its value is the key's type segment.
type lockType string

const (
	queueLock lockType = "q:"
	execLock  lockType = "x:"
)

// lockKey returns the lock key of one slot. The kind ends at the first ':', the key value (any
// bytes) at the last.
func lockKey(prefix string, typ lockType, kind, key string, slot int) (string, error) {
	switch {
	case slot < 0 || slot >= MaxLimit:
		return "", fmt.Errorf("%w slot %d: want 0 to %d", ErrInvalid, slot, MaxLimit-1)
	case kind == "":
		return "", fmt.Errorf("%w kind: empty", ErrInvalid)
	case len(kind) > MaxNameLen:
		return "", fmt.Errorf("%w kind: %d bytes, at most %d", ErrInvalid, len(kind), MaxNameLen)
	case strings.ContainsRune(kind, ':'):
		return "", fmt.Errorf("%w kind %q: contains ':', the lock key separator", ErrInvalid, kind)
	}
	return prefix + string(typ) + kind + ":" + keyPart(key) + ":" + strconv.Itoa(slot), nil
}

// keyPart returns the key value as it appears in a lock key: itself, or "sha256:" and its hash when
// longer than MaxKeyLen or starting with "sha256:", so that no literal value names a hashed one's lock.
func keyPart(key string) string {
	if len(key) <= MaxKeyLen && !strings.HasPrefix(key, "sha256:") {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// PingNodes sends PING to every node at once and returns each node's error (nil when it answered)
// in Config.Nodes order, within CallTimeout or until ctx ends.
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

// Stats counts a Locker's lock calls since it was created, for metrics; failed attempts are Taken
// plus Unavailable. Attempts ended by their context, and invalid arguments, are not counted.
type Stats struct {
	Acquired      uint64 // attempts that got their lock
	Taken         uint64 // attempts refused by another holder, one per slot a slot search found taken
	Unavailable   uint64 // attempts that failed because a quorum of nodes did not answer in time
	Extended      uint64 // successful extensions
	ExtendFailed  uint64 // extensions that returned ErrLost
	Released      uint64 // locks released on a quorum
	ReleaseFailed uint64 // releases that found the lock lost or the nodes unavailable
}

// Stats returns a snapshot of the Locker's counters.
func (l *Locker) Stats() Stats {
	c := &l.stats
	return Stats{Acquired: c.acquired.Load(), Taken: c.taken.Load(), Unavailable: c.unavailable.Load(),
		Extended: c.extended.Load(), ExtendFailed: c.extendFailed.Load(), Released: c.released.Load(),
		ReleaseFailed: c.releaseFailed.Load()}
}
