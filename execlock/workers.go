package execlock

import (
	"sync"
	"time"
)

// workerIdle is how long a command worker waits for the next command before it exits.
const workerIdle = 500 * time.Millisecond

// workers runs the gates' commands (gate.go) on goroutines that outlive one command. Each command
// runs deep in go-redis, and a fresh goroutine grows its stack there from the minimum, copying it at
// each step, which with four lock commands per job was a visible share of the process's CPU. A worker whose stack has grown takes the next command instead, and exits after
// workerIdle without one, so an idle Locker holds no goroutine for long.
type workers struct {
	work chan func() // unbuffered: a send succeeds only when a worker is idle

	mu     sync.Mutex
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

func newWorkers() *workers {
	return &workers{work: make(chan func()), stop: make(chan struct{})}
}

// do runs f on an idle worker, or on a new one. After close it runs f on a goroutine of its own:
// a command of a lock still held when the Locker closed must still be able to finish.
func (w *workers) do(f func()) {
	select {
	case w.work <- f:
		return
	default:
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		go f()
		return
	}
	w.wg.Add(1)
	w.mu.Unlock()
	go w.loop(f)
}

func (w *workers) loop(f func()) {
	defer w.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-w.work:
		case <-idle.C:
			return
		case <-w.stop:
			return
		}
	}
}

// close ends the idle workers and waits for the busy ones to finish their command (each is bounded
// by its deadline: CallTimeout at most).
func (w *workers) close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.stop)
	}
	w.mu.Unlock()
	w.wg.Wait()
}
