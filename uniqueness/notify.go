package uniqueness

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
)

const notifySQL = `SELECT pg_notify($1, $2)`

// InsertCoalesced is Insert for a pool that concurrent callers share. It returns once the dispatchers
// have been notified of its job, and uses pool only until then: the caller may close the pool as
// soon as it returns.
//
// PostgreSQL serialises the commits of transactions that send a notification: each holds a lock from
// before its commit until the commit is on disk, so concurrent enqueuers whose inserts each notified
// would commit one at a time. So while another InsertCoalesced of the kind is running through pool,
// the insert commits without a notification, and the calls that commit while a notification is being
// sent share the next one, sent by one of them after all their commits. A call with no other running
// through pool notifies in its own statement, as Insert does, in one round trip.
//
// A notification that fails, or that ctx ends before, is not reported: the job is committed, and the
// dispatchers' poll finds it.
func (in *Inserter) InsertCoalesced(ctx context.Context, pool *pgxpool.Pool, r Row, s Strategy) (Result, error) {
	p, alone := in.pools.enter(pool)
	defer in.pools.leave(pool, p)
	if alone {
		return in.Insert(ctx, pool, r, s)
	}
	res, err := in.InsertQuiet(ctx, pool, r, s)
	if err == nil {
		// A duplicate too: under a Replace strategy the waiting job may have become due sooner.
		p.notifyCommitted(ctx, pool, in.info.Name)
	}
	return res, err
}

// poolNotifier shares the notifications of one kind's concurrent InsertCoalesced calls through the
// same pool. It belongs to the kind's Inserter, and refers to a pool only while a call through it is
// running: nothing of a closed pool stays behind.
type poolNotifier struct {
	mu    sync.Mutex
	pools map[*pgxpool.Pool]*poolNotes
}

// poolNotes is what a poolNotifier knows of one pool while calls through it run. The calls take turns
// to send; a notification is numbered when it starts, and a call is covered once a notification that
// started after its commit has been sent.
type poolNotes struct {
	calls   int           // running InsertCoalesced calls through the pool; guarded by poolNotifier.mu
	turn    chan struct{} // holds a token while a call sends or checks whether it is covered
	started atomic.Uint64 // the number of the last notification started
	sent    atomic.Uint64 // the number of the last notification sent without error
}

// enter counts a call through pool in, and says whether it is the only one running.
func (n *poolNotifier) enter(pool *pgxpool.Pool) (p *poolNotes, alone bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p = n.pools[pool]
	if p == nil {
		if n.pools == nil {
			n.pools = map[*pgxpool.Pool]*poolNotes{}
		}
		p = &poolNotes{turn: make(chan struct{}, 1)}
		n.pools[pool] = p
	}
	p.calls++
	return p, p.calls == 1
}

// leave counts a call through pool out, and forgets the pool after the last one.
func (n *poolNotifier) leave(pool *pgxpool.Pool, p *poolNotes) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p.calls--; p.calls == 0 {
		delete(n.pools, pool)
	}
}

// notifyCommitted returns once a notification started after this call has been sent through pool,
// sending one itself unless another call's covered it meanwhile.
func (p *poolNotes) notifyCommitted(ctx context.Context, pool *pgxpool.Pool, kind string) {
	after := p.started.Load() // any notification started from now on follows the caller's commit
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-p.turn }()
	if p.sent.Load() > after {
		return // sent by another call while this one waited for its turn
	}
	num := p.started.Add(1)
	if _, err := pool.Exec(ctx, notifySQL, NotifyChannel, kind); err == nil {
		p.sent.Store(num)
	}
	// On an error the calls that were counting on this notification find it unsent and send their own.
}
