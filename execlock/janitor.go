package execlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The janitor retries deletes that could not reach their node: a Release, or the clean-up of a
// failed attempt, while the node was down or stalled. Without it such a key stays for its whole
// TTL once the node is back, and a stalled node is worse: when it resumes it runs the SET NX of an
// attempt that failed long ago, creating a lock that nobody holds for a full TTL from then (with a
// single node, the key is blocked that long; see TestStalledNodeRecovers). The janitor's
// compare-and-delete only ever removes the value of a lock this process gave up, so it is safe
// whenever it lands.
//
// A delete that succeeded is sent once more, confirmDelay later. When a node resumes, it runs what
// was written to it while it was stopped, and not in the order it was written: the connections it
// had already accepted are read first, those dialled during the stall only once accepted, in a
// later turn of its event loop, and a large pipeline is read in pieces between other clients'.
// An old SET NX on a new connection can so land after a delete of the same lock on an old one:
// the delete finds nothing and succeeds, and the SET NX then creates a lock that nobody holds.
// By confirmDelay after the first delete's answer the node has read everything written before
// it, so the second delete removes such a SET NX.

const (
	// janitorHorizon bounds how long a delete is retried: a node stalled for longer leaves its
	// leftovers to expire by their TTL.
	janitorHorizon = 10 * time.Minute
	// maxPendingDeletes bounds the janitor's memory during a long outage; further deletes are
	// dropped and their keys expire by their TTL.
	maxPendingDeletes = 10000
)

// confirmDelay is how long after its first success a delete is sent again: a quarter of the
// janitor's interval (CallTimeout), at least confirmDelayMin. A resumed node reads what was
// written to it while stopped within a few turns of its event loop, milliseconds.
func confirmDelay(interval time.Duration) time.Duration {
	return max(interval/4, confirmDelayMin)
}

const confirmDelayMin = 20 * time.Millisecond

// deleteScript deletes a key only if it still holds the given value (as redsync's unlock does).
// It is sent whole (EVAL, not EVALSHA): a node that restarted empty has no script cache.
const deleteScript = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`

type pendingDelete struct {
	node       int
	key, value string
	giveUp     time.Time
	// confirm is set once the delete has succeeded: it is then sent once more, not before
	// notBefore.
	confirm   bool
	notBefore time.Time
}

type janitor struct {
	nodes    []*redis.Client
	interval time.Duration // between sweeps; also each sweep's per-node timeout

	mu      sync.Mutex
	pending []pendingDelete
	out     int  // deletes taken out of pending by the sweep in progress
	running bool // a sweeping goroutine exists
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

func newJanitor(nodes []*redis.Client, interval time.Duration) *janitor {
	return &janitor{nodes: nodes, interval: interval, stop: make(chan struct{})}
}

// add schedules a delete of key=value on node, and starts sweeping if needed.
func (j *janitor) add(node int, key, value string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed || len(j.pending) >= maxPendingDeletes {
		return
	}
	j.pending = append(j.pending, pendingDelete{node: node, key: key, value: value, giveUp: time.Now().Add(janitorHorizon)})
	if !j.running {
		j.running = true
		j.wg.Add(1)
		go j.run()
	}
}

// run sweeps every interval (sooner when a confirmation is due) until nothing is pending or the
// janitor is closed.
func (j *janitor) run() {
	defer j.wg.Done()
	t := time.NewTimer(j.interval)
	defer t.Stop()
	for {
		select {
		case <-j.stop:
			return
		case <-t.C:
		}
		j.mu.Lock()
		batch := j.pending
		j.pending, j.out = nil, len(batch)
		j.mu.Unlock()

		left := j.sweep(batch)

		j.mu.Lock()
		j.out = 0
		if !j.closed {
			j.pending = append(left, j.pending...)
		}
		if len(j.pending) == 0 || j.closed {
			j.running = false
			j.mu.Unlock()
			return
		}
		t.Reset(j.nextSweep())
		j.mu.Unlock()
	}
}

// nextSweep returns how long to wait for the next sweep: the interval, or less when every pending
// delete is a confirmation due sooner. Called with mu held.
func (j *janitor) nextSweep() time.Duration {
	wait := j.interval
	due := time.Time{}
	for _, d := range j.pending {
		if !d.confirm {
			return wait
		}
		if due.IsZero() || d.notBefore.Before(due) {
			due = d.notBefore
		}
	}
	return min(wait, max(time.Until(due), 0))
}

// sweep tries every delete of batch that is due, one pipeline per node, and returns those to
// try again: the failed ones, the confirmations of the first successes, and the ones not due.
func (j *janitor) sweep(batch []pendingDelete) []pendingDelete {
	byNode := map[int][]pendingDelete{}
	now := time.Now()
	var left []pendingDelete
	for _, d := range batch {
		switch {
		case !now.Before(d.giveUp):
		case d.confirm && now.Before(d.notBefore):
			left = append(left, d)
		default:
			byNode[d.node] = append(byNode[d.node], d)
		}
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for node, ds := range byNode {
		wg.Go(func() {
			if again := j.deleteOn(node, ds); len(again) > 0 {
				mu.Lock()
				left = append(left, again...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return left
}

// deleteOn runs ds on one node and returns what is left of them: those that did not get an
// answer, to try again, and a confirmation of each first success.
func (j *janitor) deleteOn(node int, ds []pendingDelete) []pendingDelete {
	ctx, cancel := context.WithTimeout(context.Background(), j.interval)
	defer cancel()
	c := j.nodes[node]
	cmds := make([]*redis.Cmd, len(ds))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, d := range ds {
			cmds[i] = p.Eval(ctx, deleteScript, []string{d.key}, d.value)
		}
		return nil
	})
	if errors.Is(err, redis.ErrClosed) {
		return nil // the client is gone: nothing more to do
	}
	var again []pendingDelete
	answered := time.Now()
	for i, cmd := range cmds {
		d := ds[i]
		switch {
		case cmd.Err() != nil:
			d.confirm = false // the node is gone again: the next success needs its own confirmation
			again = append(again, d)
		case !d.confirm:
			d.confirm, d.notBefore = true, answered.Add(confirmDelay(j.interval))
			again = append(again, d)
		}
	}
	return again
}

// close stops sweeping and drops what is pending.
func (j *janitor) close() {
	j.mu.Lock()
	if !j.closed {
		j.closed = true
		close(j.stop)
	}
	j.pending = nil
	j.mu.Unlock()
	j.wg.Wait()
}

// pendingCount returns how many deletes wait for their node or for their confirmation.
func (j *janitor) pendingCount() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending) + j.out
}
