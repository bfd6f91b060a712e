package main

import (
	"sync"
	"sync/atomic"
)

// The ledger grows in chunks, so steady, which does not know its job count in advance, needs no lock
// on the worker's path.
const (
	ledgerChunkBits = 16
	ledgerChunks    = 1 << 14
	maxLedgerJobs   = ledgerChunks << ledgerChunkBits
)

type ledgerChunk [1 << ledgerChunkBits]atomic.Int32

// ledger counts the worker runs of each job by its N: the accounting jobpipe's bench keeps too.
type ledger struct {
	grow   sync.Mutex
	chunks [ledgerChunks]atomic.Pointer[ledgerChunk]
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

// run records one worker run of job n.
func (l *ledger) run(n int64) { l.slot(n).Add(1) }

// count returns how many times job n ran.
func (l *ledger) count(n int64) int32 { return l.slot(n).Load() }
