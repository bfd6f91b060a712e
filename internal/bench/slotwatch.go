package bench

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// slotWatch sees a keyed kind's limit from inside the handlers: how many jobs of each key run at once,
// whether that ever exceeds the key's limit, and how long a slot stays empty once it frees. A
// handler's run lies inside its job's hold on the slot (the slot is taken before the handler starts
// and released after it returns), so what the handlers see running never exceeds what holds slots.
type slotWatch struct {
	limit     int
	keys      []slotKey
	overLimit atomic.Int64 // handler starts that made their key run more than limit
	started   atomic.Int64
	ended     atomic.Int64
}

// slotKey is one key's state; its mutex orders the key's starts and ends.
type slotKey struct {
	mu      sync.Mutex
	running int
	max     int
	queued  int64     // the key's jobs not started yet
	freedAt time.Time // a slot freed while the key was at its limit with jobs queued; zero once refilled
	waits   []time.Duration
}

// newSlotWatch watches len(queued) keys, queued[i] jobs of key i waiting, each key limited to limit.
func newSlotWatch(limit int, queued []int64) *slotWatch {
	w := &slotWatch{limit: limit, keys: make([]slotKey, len(queued))}
	for i, q := range queued {
		w.keys[i].queued = q
	}
	return w
}

// enter records that a job of key k starts now, and returns when.
func (w *slotWatch) enter(k int) time.Time {
	s := &w.keys[k]
	s.mu.Lock()
	now := time.Now()
	s.running++
	s.max = max(s.max, s.running)
	s.queued = max(0, s.queued-1)
	if !s.freedAt.IsZero() {
		s.waits = append(s.waits, now.Sub(s.freedAt))
		s.freedAt = time.Time{}
	}
	over := s.running > w.limit
	s.mu.Unlock()
	if over {
		w.overLimit.Add(1)
	}
	w.started.Add(1)
	return now
}

// leave records that a job of key k has returned. A key that was at its limit with jobs still
// queued now has a free slot that one of them should take: the wait runs until the key's next start.
func (w *slotWatch) leave(k int) time.Time {
	s := &w.keys[k]
	s.mu.Lock()
	now := time.Now()
	if s.running >= w.limit && s.queued > 0 {
		s.freedAt = now
	}
	s.running--
	s.mu.Unlock()
	w.ended.Add(1)
	return now
}

// slotSummary is what a slotWatch saw, over all keys or one.
type slotSummary struct {
	MaxPerKey    int   `json:"max_per_key"`
	OverLimit    int64 `json:"over_limit"`
	ReachedLimit int   `json:"reached_limit_keys"`
	// Waits are the slot waits, sorted: from a slot freeing at the limit to the key's next start.
	Waits []time.Duration `json:"-"`
}

// summary gathers the keys from..to-1; call it once the handlers have stopped.
func (w *slotWatch) summary(from, to int) slotSummary {
	sum := slotSummary{OverLimit: w.overLimit.Load()}
	for i := from; i < to; i++ {
		s := &w.keys[i]
		s.mu.Lock()
		sum.MaxPerKey = max(sum.MaxPerKey, s.max)
		if s.max >= w.limit {
			sum.ReachedLimit++
		}
		sum.Waits = append(sum.Waits, s.waits...)
		s.mu.Unlock()
	}
	slices.Sort(sum.Waits)
	return sum
}

// waitMs is the p-th percentile of the slot waits in milliseconds, 0 when there were none.
func (s slotSummary) waitMs(p int) float64 {
	if len(s.Waits) == 0 {
		return 0
	}
	return ms(pct(s.Waits, p))
}
