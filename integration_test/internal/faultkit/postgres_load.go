package faultkit

// The steady offered load of the PostgreSQL scenarios, which rides through a server that goes away.

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// OfferedLoad offers jobs at a steady rate: every tick it enqueues what the rate owes since it began,
// so that jobs a failed enqueue (the server down) did not insert are offered again at the next one.
type OfferedLoad struct {
	e                    *PostgresWorld
	plainRate, keyedRate float64 // jobs per second
	began                time.Time

	mu             sync.Mutex
	plainIDs       []int64
	keyedIDs       []int64
	plainN, keyedN int // jobs enqueued so far, which the rate counts
	failures       int // enqueue calls that failed

	// plainSeq and keyedSeq are the next seq numbers, run's alone. A failed enqueue may have
	// inserted its rows all the same (the server went away before answering), so the jobs offered
	// again take new numbers: a plain job's blog id is its seq's, and two plain jobs sharing one
	// would count as two handlers of one blog at once (CheckConc).
	plainSeq, keyedSeq int64

	stop, done chan struct{}
}

// StartLoad starts offering plainRate plain and keyedRate keyed jobs per second.
func (e *PostgresWorld) StartLoad(plainRate, keyedRate float64) *OfferedLoad {
	l := &OfferedLoad{e: e, plainRate: plainRate, keyedRate: keyedRate, began: time.Now(),
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *OfferedLoad) run() {
	defer close(l.done)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		elapsed := time.Since(l.began).Seconds()
		l.offerPlain(int(elapsed*l.plainRate) - l.plainN)
		l.offerKeyed(int(elapsed*l.keyedRate) - l.keyedN)
	}
}

// offerPlain enqueues n plain jobs (at most 2,000 at once).
func (l *OfferedLoad) offerPlain(n int) {
	n = min(n, 2000)
	if n <= 0 {
		return
	}
	jobs := make([]PlainJob, n)
	for i := range jobs {
		seq := l.plainSeq + int64(i)
		jobs[i] = PlainJob{BlogID: postgresPlainBlogBase + seq, Seq: seq}
	}
	l.plainSeq += int64(n)
	ids, ok := enqueueOnce(l.e.DB, l.e.Plain, jobs)
	l.record(ok, func() { l.plainIDs = append(l.plainIDs, ids...); l.plainN += n })
}

// offerKeyed enqueues n keyed jobs spread over keyedBlogs keys (at most 2,000 at once).
func (l *OfferedLoad) offerKeyed(n int) {
	n = min(n, 2000)
	if n <= 0 {
		return
	}
	jobs := make([]KeyedJob, n)
	for i := range jobs {
		seq := l.keyedSeq + int64(i)
		jobs[i] = KeyedJob{BlogID: 1 + seq%keyedBlogs, Seq: seq}
	}
	l.keyedSeq += int64(n)
	ids, ok := enqueueOnce(l.e.DB, l.e.Kind, jobs)
	l.record(ok, func() { l.keyedIDs = append(l.keyedIDs, ids...); l.keyedN += n })
}

func (l *OfferedLoad) record(ok bool, add func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ok {
		l.failures++
		return
	}
	add()
}

// Reference is what a scenario's throughput ratios compare with: the baseline's completions per
// second, capped at the offered rate, since a baseline window may include the catch-up of a backlog
// (the workers' start, or a moment's stall of the machine), which no later window can match.
func (l *OfferedLoad) Reference(base KindRates) KindRates {
	return KindRates{Plain: min(base.Plain, l.plainRate), Keyed: min(base.Keyed, l.keyedRate)}
}

// enqueueOnce enqueues jobs in one statement and returns their ids, or false when it failed. A failure
// whose statement committed nonetheless (the server went away before answering) leaves rows this
// load does not know of: the scenarios check every row of the tables, not only the known ids.
func enqueueOnce[T any](db *pgxpool.Pool, kind *jobinfo.Kind[T], jobs []T) ([]int64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := dispatcher.EnqueueMany(ctx, db, kind, jobs)
	if err != nil {
		return nil, false
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		if r.Err != nil {
			return nil, false
		}
		ids[i] = r.ID
	}
	return ids, true
}

// Stop stops offering and returns how many jobs of each kind were enqueued and how many enqueue
// calls failed.
func (l *OfferedLoad) Stop() (plain, keyed []int64, failures int) {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.plainIDs, l.keyedIDs, l.failures
}
