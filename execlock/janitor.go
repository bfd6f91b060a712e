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

const (
	// janitorHorizon bounds how long a delete is retried: a node stalled for longer leaves its
	// leftovers to expire by their TTL.
	janitorHorizon = 10 * time.Minute
	// maxPendingDeletes bounds the janitor's memory during a long outage; further deletes are
	// dropped and their keys expire by their TTL.
	maxPendingDeletes = 10000
)

// deleteScript deletes a key only if it still holds the given value (as redsync's unlock does).
// It is sent whole (EVAL, not EVALSHA): a node that restarted empty has no script cache.
const deleteScript = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`

type pendingDelete struct {
	node       int
	key, value string
	giveUp     time.Time
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

// run sweeps every interval until nothing is pending or the janitor is closed.
func (j *janitor) run() {
	defer j.wg.Done()
	t := time.NewTicker(j.interval)
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
		j.mu.Unlock()
	}
}

// sweep tries every delete of batch, one pipeline per node, and returns those to try again.
func (j *janitor) sweep(batch []pendingDelete) []pendingDelete {
	byNode := map[int][]pendingDelete{}
	now := time.Now()
	for _, d := range batch {
		if now.Before(d.giveUp) {
			byNode[d.node] = append(byNode[d.node], d)
		}
	}
	var (
		mu   sync.Mutex
		left []pendingDelete
		wg   sync.WaitGroup
	)
	for node, ds := range byNode {
		wg.Go(func() {
			if failed := j.deleteOn(node, ds); len(failed) > 0 {
				mu.Lock()
				left = append(left, failed...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return left
}

// deleteOn runs ds on one node and returns the deletes that did not get an answer.
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
	var failed []pendingDelete
	for i, cmd := range cmds {
		if cmd.Err() != nil {
			failed = append(failed, ds[i])
		}
	}
	return failed
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

// pendingCount returns how many deletes wait for their node.
func (j *janitor) pendingCount() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending) + j.out
}
