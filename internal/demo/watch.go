package demo

import (
	"sync"
	"time"
)

// watch records what the handlers see: how many jobs of each key run at once, the order in which each
// key's jobs start, scheduled jobs that started early, and how often each job completed.
type watch struct {
	mu        sync.Mutex
	running   map[string]int
	maxPerKey map[string]int // by kind: the most jobs of one key seen running at once
	lastSeq   map[int64]int64
	outOfSeq  int
	early     int
	latest    time.Duration // the latest a scheduled job started after its time
	completed map[string]map[int64]int
}

func newWatch() *watch {
	return &watch{running: map[string]int{}, maxPerKey: map[string]int{}, lastSeq: map[int64]int64{},
		completed: map[string]map[int64]int{}}
}

// enter notes a job of kind's key starting; the returned func notes it ending.
func (w *watch) enter(kind, key string) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := kind + "/" + key
	w.running[k]++
	w.maxPerKey[kind] = max(w.maxPerKey[kind], w.running[k])
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.running[k]--
	}
}

// started notes the seq of a blog's job starting; seqs of one blog must rise.
func (w *watch) started(blog, seq int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if last, ok := w.lastSeq[blog]; ok && seq <= last {
		w.outOfSeq++
	}
	w.lastSeq[blog] = seq
}

// scheduled notes a scheduled job starting at now (database clock) when it was due at due.
func (w *watch) scheduled(due, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Before(due) {
		w.early++
	}
	w.latest = max(w.latest, now.Sub(due))
}

// done notes a job completing successfully.
func (w *watch) done(kind string, id int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.completed[kind] == nil {
		w.completed[kind] = map[int64]int{}
	}
	w.completed[kind][id]++
}

// completedTwice counts jobs that completed more than once.
func (w *watch) completedTwice() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, ids := range w.completed {
		for _, c := range ids {
			if c > 1 {
				n++
			}
		}
	}
	return n
}
