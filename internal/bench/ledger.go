package bench

import (
	"sync"
	"sync/atomic"
)

// The ledger grows in chunks, so steady, which does not know its job count in advance, needs no lock
// on the handler's path.
const (
	ledgerChunkBits = 16
	ledgerChunks    = 1 << 14 // 2^30 jobs in all
)

type ledgerChunk [1 << ledgerChunkBits]atomic.Int32

// ledger counts the handler runs of each job by its index (the job's n column): the accounting every
// scenario checks.
type ledger struct {
	grow   sync.Mutex
	chunks [ledgerChunks]atomic.Pointer[ledgerChunk]
	runs   atomic.Int64 // handler runs in all
}

// slot returns job n's counter, allocating its chunk on first use.
func (l *ledger) slot(n int64) *atomic.Int32 {
	i := n >> ledgerChunkBits
	c := l.chunks[i].Load()
	if c == nil {
		l.grow.Lock()
		if c = l.chunks[i].Load(); c == nil {
			c = new(ledgerChunk)
			l.chunks[i].Store(c)
		}
		l.grow.Unlock()
	}
	return &c[n&(1<<ledgerChunkBits-1)]
}

// run records one handler run of job n.
func (l *ledger) run(n int64) {
	l.slot(n).Add(1)
	l.runs.Add(1)
}

// count returns how many times job n ran.
func (l *ledger) count(n int64) int32 { return l.slot(n).Load() }

// tally checks jobs 0 to jobs-1: how many ran more than once and which never ran (at most keep of
// them are listed).
func (l *ledger) tally(jobs int64, keep int) (duplicates int64, never []int64, neverCount int64) {
	for n := range jobs {
		switch c := l.count(n); {
		case c > 1:
			duplicates++
		case c == 0:
			neverCount++
			if len(never) < keep {
				never = append(never, n)
			}
		}
	}
	return duplicates, never, neverCount
}
