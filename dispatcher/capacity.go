package dispatcher

import "sync/atomic"

// capacity is how much of a kind this dispatcher takes on at once: a place per running job
// (Concurrency), and a bound on the outcomes waiting to be written (maxFinishing). The producer takes
// a place for each job it starts; the job's worker gives it back when the handler returns, and
// counts the outcome as written once it is, telling the producer each time (freed).
type capacity struct {
	running chan struct{} // a token per running job
	// finishing counts jobs whose handler has returned and whose outcome is not written yet: they
	// hold no place in running, and the producer claims no more while maxFinishing are pending, so
	// claims never run far ahead of the finisher.
	finishing atomic.Int64
	// freed is buffered 1: "a worker is free" (its handler returned, or an outcome was written). It
	// makes the producer look for work only while the kind has more due than it could take (see
	// producer.run); otherwise each job's end would cost a claim that finds nothing.
	freed chan struct{}
}

func newCapacity(concurrency int) *capacity {
	return &capacity{running: make(chan struct{}, concurrency), freed: make(chan struct{}, 1)}
}

// take holds a place for a job the producer starts.
func (c *capacity) take() { c.running <- struct{}{} }

// handlerReturned gives back the place of a job whose handler has returned; its outcome is now
// being written.
func (c *capacity) handlerReturned() {
	c.finishing.Add(1)
	<-c.running
	c.notify()
}

// outcomeWritten counts a job's outcome as written (or given up).
func (c *capacity) outcomeWritten() {
	c.finishing.Add(-1)
	c.notify()
}

// free is how many jobs the producer may start now: below 0 when more than maxFinishing outcomes
// wait to be written.
func (c *capacity) free() int {
	return min(cap(c.running)-len(c.running), c.maxFinishing()-int(c.finishing.Load()))
}

// size is the most jobs that run at once.
func (c *capacity) size() int { return cap(c.running) }

// maxFinishing is how many outcomes may wait to be written before the kind claims no more: enough
// that a slow commit or two (a checkpoint's) do not stop the claims of a busy dispatcher, few enough
// that claims never run far ahead of the finisher.
func (c *capacity) maxFinishing() int { return max(cap(c.running), maxFinishBatch) }

// notify tells the producer, without blocking, that a worker is free.
func (c *capacity) notify() {
	select {
	case c.freed <- struct{}{}:
	default:
	}
}
