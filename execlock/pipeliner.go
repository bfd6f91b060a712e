package execlock

import (
	"context"
	"sync"

	goredislib "github.com/redis/go-redis/v9"
)

// maxPipeline bounds the commands of one pipeline: a dispatcher's claim pass queues up to a few
// hundred lock commands at once.
const maxPipeline = 256

// pipeliner sends one node's lock commands in pipelines: the commands queued while a pipeline is
// on the wire leave together as the next, in one write and one read. One pipeline is on the wire
// at a time, so a node sees its commands in the order they were queued.
//
// Why not go-redis's own automatic pipeliner: the Locker used it at first. Its blocking face
// returns only with the answer, so a command that must outlive its round needed a goroutine of
// the Locker's to wait in (gate.go's run). Its deferred face can be waited on with a deadline, but
// it is experimental, and under it a pipeline hook that reads a command's result makes go-redis
// parse the goroutine's stack, a large share of the process's CPU (docs/benchmarks.md, "Why the
// Locker's own pipeliner"). Here queueing is an append under a mutex, the pipelines are
// written and read by one of the Locker's workers through go-redis's ordinary Pipeline, and hooks
// see ordinary pipelines.
type pipeliner struct {
	client  *goredislib.Client
	workers *workers

	mu      sync.Mutex
	queue   []*queuedCmd
	running bool // a worker runs loop
}

func newPipeliner(client *goredislib.Client, w *workers) *pipeliner {
	return &pipeliner{client: client, workers: w}
}

// submit queues q; q.done is closed once the node answered it, or failed to.
func (p *pipeliner) submit(q *queuedCmd) {
	p.mu.Lock()
	p.queue = append(p.queue, q)
	start := !p.running
	p.running = true
	p.mu.Unlock()
	if start {
		p.workers.do(p.loop)
	}
}

// loop sends pipelines until the queue is empty.
func (p *pipeliner) loop() {
	for {
		p.mu.Lock()
		batch := p.queue
		if len(batch) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		// What is left stays queued: appends go past the end of batch, so batch[:n] is this loop's.
		n := min(len(batch), maxPipeline)
		p.queue = batch[n:]
		p.mu.Unlock()
		p.exec(batch[:n])
	}
}

// exec sends batch as one pipeline. Its commands are bounded by the client's read and write
// timeouts, not by their calls' deadlines: a call that gives up leaves its command to finish here.
func (p *pipeliner) exec(batch []*queuedCmd) {
	pipe := p.client.Pipeline()
	ctx := context.Background()
	for _, q := range batch {
		_ = pipe.Process(ctx, q.cmd)
	}
	_, _ = pipe.Exec(ctx) // each command holds its own answer or error
	for _, q := range batch {
		close(q.done)
	}
}
