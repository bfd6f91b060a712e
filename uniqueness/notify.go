package uniqueness

import (
	"context"
	"sync"
	"time"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// NotifyWindow is the most often NotifyCommitted notifies one kind through one database handle.
//
// PostgreSQL serialises the commits of transactions that sent a notification: each holds a global
// lock from before its commit until the commit is on disk. A statement that notifies with every
// single insert therefore caps concurrent enqueuers at one commit at a time, and every enqueue waits
// in that queue. Coalesced, the inserts commit side by side and the dispatchers are still woken
// within a window of the first of them.
const NotifyWindow = 5 * time.Millisecond

// notifyTimeout bounds one coalesced notification; a failed one is made up for by the dispatchers'
// poll.
const notifyTimeout = 5 * time.Second

type notifyKey struct {
	db   jobinfo.DB
	kind string
}

// coalescer sends at most one notification per NotifyWindow for its key, always after the commits
// it was told of.
type coalescer struct {
	mu      sync.Mutex
	pending bool      // a notification is scheduled and has not started yet
	next    time.Time // the earliest time the next one may be sent
}

var coalescers sync.Map // notifyKey -> *coalescer

// NotifyCommitted wakes the dispatchers of kind, on NotifyChannel through db, for jobs that
// InsertQuiet inserted and that are committed: call it after the commit. Calls for the same db and
// kind are coalesced: a notification goes at most every NotifyWindow, and always after every commit
// whose NotifyCommitted came before it. It returns at once; the notification is sent in the
// background.
func NotifyCommitted(db jobinfo.DB, kind string) {
	key := notifyKey{db, kind}
	c, ok := coalescers.Load(key)
	if !ok {
		c, _ = coalescers.LoadOrStore(key, &coalescer{})
	}
	c.(*coalescer).schedule(db, kind)
}

func (c *coalescer) schedule(db jobinfo.DB, kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending {
		// The scheduled notification starts after this call, so after the commit it stands for.
		return
	}
	c.pending = true
	time.AfterFunc(max(0, time.Until(c.next)), func() {
		c.mu.Lock()
		c.pending = false
		c.next = time.Now().Add(NotifyWindow)
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		defer cancel()
		_, _ = db.Exec(ctx, notifySQL, NotifyChannel, kind)
	})
}

const notifySQL = `SELECT pg_notify($1, $2)`
