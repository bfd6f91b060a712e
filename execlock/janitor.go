package execlock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// deleteScript is the Locker's own compare-and-delete, so that it never touches another holder's
// lock. It is sent whole (EVAL), since a node that restarted empty has no script cache.
const deleteScript = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`

const (
	// janitorHorizon bounds how long a delete is retried; past it, leftovers expire by their TTL.
	janitorHorizon = 10 * time.Minute
	// maxPendingDeletes bounds the janitor's memory in a long outage; what it drops expires by its TTL.
	maxPendingDeletes = 10000
)

// pendingDelete is one compare-and-delete of key=value on one node.
type pendingDelete struct {
	node        int
	key, value  string
	due, giveUp time.Time
	acquire     *nodeTrack // the acquire's command on the node; nil once a send failed
	answered    bool       // the node answered once: the next send is the confirmation
}

// janitor sends the Locker's compare-and-delete where a lock call may have left its value: once the
// call's commands have ended, then every interval until the node answers, then once more a tick later,
// as a node resuming from a stall runs what it was sent in any order: a SET NX may follow the delete.
// Where the acquire's SET NX was answered, none can: the delete is sent at once, and not confirmed.
type janitor struct {
	nodes    []*redis.Client
	interval time.Duration // between retries; also each send's timeout
	kick     chan struct{} // capacity 1: Close's request for a sweep now
	wg       sync.WaitGroup

	mu              sync.Mutex
	pending         []pendingDelete
	out             int // deletes being sent
	running, closed bool
	closeBy         time.Time // once closed: what is still pending then is dropped
}

// add schedules the delete of key=value on each of nodes, due at the end of the call that left it;
// track follows the lock's acquire.
func (j *janitor) add(nodes []int, key, value string, due time.Time, track lockTrack) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i, n := range nodes {
		if !j.closed && len(j.pending) < maxPendingDeletes && !slices.Contains(nodes[:i], n) {
			j.pending = append(j.pending, pendingDelete{node: n, key: key, value: value,
				due: due, giveUp: due.Add(janitorHorizon), acquire: &track[n]})
		}
	}
	if len(j.pending) > 0 && !j.running {
		j.running = true
		j.wg.Go(j.loop)
	}
}

// tick is the janitor's step and the confirmation's delay: a few turns of a resumed node's event loop.
func (j *janitor) tick() time.Duration { return max(j.interval/4, 20*time.Millisecond) }

// loop sends the deletes that are due each tick, until none is pending.
func (j *janitor) loop() {
	t := time.NewTicker(j.tick())
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-j.kick:
		}
		now, byNode := time.Now(), map[int][]pendingDelete{}
		j.mu.Lock()
		if len(j.pending) == 0 {
			j.running = false
			j.mu.Unlock()
			return
		}
		kept := j.pending[:0]
		for _, d := range j.pending {
			switch {
			case !now.Before(d.giveUp), j.closed && !now.Before(j.closeBy):
			case now.Before(d.due) && !d.acquire.settled(): // settled: nothing it sent can land later
				kept = append(kept, d)
			default:
				byNode[d.node] = append(byNode[d.node], d)
				j.out++
			}
		}
		j.pending = kept
		j.mu.Unlock()
		var wg sync.WaitGroup
		for node, ds := range byNode {
			wg.Go(func() { j.send(node, ds) })
		}
		wg.Wait()
	}
}

// send runs ds on one node in one pipeline, and puts back those without an answer, due again in an
// interval, and the confirmation of each first answer, due in a tick.
func (j *janitor) send(node int, ds []pendingDelete) {
	ctx, cancel := context.WithTimeout(context.Background(), j.interval)
	defer cancel()
	p, cmds := j.nodes[node].Pipeline(), make([]*redis.Cmd, len(ds))
	settled := make([]bool, len(ds))
	for i, d := range ds {
		settled[i] = d.acquire.settled()
		cmds[i] = p.Eval(ctx, deleteScript, []string{d.key}, d.value)
	}
	_, err := p.Exec(ctx)
	now, left := time.Now(), ds[:0]
	j.mu.Lock()
	defer j.mu.Unlock()
	for i, d := range ds {
		switch {
		case errors.Is(err, redis.ErrClosed), d.answered && cmds[i].Err() == nil:
			continue // the client is gone, or confirmed
		case cmds[i].Err() != nil && j.closed:
			continue // Close's last try: a node that does not answer now is left to the TTL
		case cmds[i].Err() != nil:
			d.answered, d.due, d.acquire = false, now.Add(j.interval), nil
		case settled[i]:
			continue // nothing the acquire sent can land after this delete
		default:
			d.answered, d.due = true, now.Add(j.tick())
		}
		left = append(left, d)
	}
	j.out -= len(ds)
	j.pending = append(j.pending, left...)
}

// close refuses further deletes and sends the pending ones once more (at once where the acquire's
// command was answered, else when the call's commands have ended), lest a stopping worker leave a
// failed attempt's value on a minority of nodes for a whole TTL; what fails or is still pending a
// few ticks after the last call's deadline is dropped, to expire by its TTL.
func (j *janitor) close() {
	j.mu.Lock()
	if !j.closed {
		j.closed = true
		j.closeBy = time.Now().Add(j.interval + 3*j.tick())
		select {
		case j.kick <- struct{}{}:
		default:
		}
	}
	j.mu.Unlock()
	j.wg.Wait()
}
