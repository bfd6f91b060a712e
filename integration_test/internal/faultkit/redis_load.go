package faultkit

// The steady work of a Redis or network scenario: a feed of keyed and plain jobs, probe jobs that
// time their own heartbeats, and the lock probe.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
)

// feeder enqueues jobs at a steady rate from a goroutine of its own while a scenario runs: keyed jobs
// round-robin over its keys (each key's seq counting up, so that its order can be checked), and plain
// jobs. A steady offered load, well under what the workers sustain, makes throughput before, during
// and after a fault comparable on a machine shared with other tests: a healthy system keeps up with it
// whatever its spare capacity, and one that a fault slows falls behind.
type feeder struct {
	e                    *RedisWorld
	keys                 []int64
	keyedRate, plainRate float64

	mu        sync.Mutex
	keyed     Enqueued
	plainJobs map[int64]KeyedJob
	seq       map[int64]int64
	nextPlain int64
	err       error

	stop, done chan struct{}
}

// startFeeder feeds keyedRate keyed jobs per second over keys, and plainRate plain jobs per second,
// until Stop.
func (e *RedisWorld) startFeeder(t *testing.T, keys []int64, keyedRate, plainRate float64) *feeder {
	t.Helper()
	if plainRate > 0 && e.Plain == nil {
		t.Fatal("startFeeder: a plain rate without the plain kind")
	}
	f := &feeder{e: e, keys: keys, keyedRate: keyedRate, plainRate: plainRate, keyed: Enqueued{},
		plainJobs: map[int64]KeyedJob{}, seq: map[int64]int64{}, nextPlain: RedisPlainBlogBase,
		stop: make(chan struct{}), done: make(chan struct{})}
	go f.run()
	t.Cleanup(func() {
		select {
		case <-f.stop:
		default:
			close(f.stop)
		}
		<-f.done
	})
	return f
}

// run is the feeder's loop: every 50 ms it enqueues what the rates call for by then.
func (f *feeder) run() {
	defer close(f.done)
	began := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var keyedSent, plainSent int
	for {
		select {
		case <-f.stop:
			return
		case <-tick.C:
		}
		elapsed := time.Since(began).Seconds()
		// At most a second's worth at once: after a stall of the feeder itself, it does not flood.
		k := min(int(f.keyedRate*elapsed)-keyedSent, int(f.keyedRate)+1)
		p := min(int(f.plainRate*elapsed)-plainSent, int(f.plainRate)+1)
		if err := f.feed(k, p); err != nil {
			f.mu.Lock()
			f.err = errors.Join(f.err, err)
			f.mu.Unlock()
			return
		}
		keyedSent, plainSent = int(f.keyedRate*elapsed), int(f.plainRate*elapsed)
	}
}

// feed enqueues k keyed and p plain jobs.
func (f *feeder) feed(k, p int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if k > 0 {
		f.mu.Lock()
		jobs := make([]KeyedJob, k)
		for i := range jobs {
			b := f.keys[(len(f.keyed)+i)%len(f.keys)]
			jobs[i] = KeyedJob{BlogID: b, Seq: f.seq[b]}
			f.seq[b]++
		}
		f.mu.Unlock()
		res, err := dispatcher.EnqueueMany(ctx, f.e.DB, f.e.Kind, jobs)
		if err != nil {
			return fmt.Errorf("feeding keyed jobs: %w", err)
		}
		f.mu.Lock()
		for i, r := range res {
			if r.Err != nil || r.Duplicate {
				f.mu.Unlock()
				return fmt.Errorf("feeding %+v: %+v", jobs[i], r)
			}
			f.keyed[r.ID] = jobs[i]
		}
		f.mu.Unlock()
	}
	if p > 0 {
		jobs := make([]PlainJob, p)
		for i := range jobs {
			jobs[i] = PlainJob{BlogID: f.nextPlain, Seq: f.nextPlain}
			f.nextPlain++
		}
		res, err := dispatcher.EnqueueMany(ctx, f.e.DB, f.e.Plain, jobs)
		if err != nil {
			return fmt.Errorf("feeding plain jobs: %w", err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, r := range res {
			if r.Err != nil || r.Duplicate {
				return fmt.Errorf("feeding %+v: %+v", jobs[i], r)
			}
			f.plainJobs[r.ID] = KeyedJob{BlogID: jobs[i].BlogID, Seq: jobs[i].Seq}
		}
	}
	return nil
}

// Stop stops feeding and fails t if a feed failed. It returns what was fed: keyed and plain jobs by id.
func (f *feeder) Stop(t *testing.T) (keyed, plain map[int64]KeyedJob) {
	t.Helper()
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		t.Fatal(f.err)
	}
	return f.keyed, f.plainJobs
}

// RedisLoad is a scenario's steady work: the feed, the probe jobs (when the environment has the probe
// kind) and the lock probe (when asked for).
type RedisLoad struct {
	e      *RedisWorld
	feed   *feeder
	Locks  *LockProbe         // nil unless asked for
	Probes map[int64]KeyedJob // the probe jobs, by id
}

// LoadSpec says what load a scenario runs.
type LoadSpec struct {
	Keys                 int     // keyed jobs go round-robin over blogs 1 to Keys
	KeyedRate, PlainRate float64 // jobs per second
	Probes               int     // probe jobs, one per key (the environment needs the probe kind)
	LockProbe            bool    // time lock calls from the test process (StartLockProbe)
}

// StartLoad starts the load spec describes.
func (e *RedisWorld) StartLoad(t *testing.T, spec LoadSpec) *RedisLoad {
	t.Helper()
	l := &RedisLoad{e: e}
	if spec.Probes > 0 {
		l.Probes = e.startProbes(t, spec.Probes)
	}
	if spec.LockProbe {
		l.Locks = StartLockProbe(t, e.Addrs, RedisLeaseTTL)
	}
	keys := make([]int64, spec.Keys)
	for i := range keys {
		keys[i] = int64(i + 1)
	}
	l.feed = e.startFeeder(t, keys, spec.KeyedRate, spec.PlainRate)
	return l
}

// Stop ends the load and returns the keyed and plain jobs fed.
func (l *RedisLoad) Stop(t *testing.T) (keyed, plain map[int64]KeyedJob) {
	t.Helper()
	keyed, plain = l.feed.Stop(t)
	if l.Locks != nil {
		l.Locks.Stop()
	}
	if l.Probes != nil {
		l.e.stopProbes(t)
	}
	return keyed, plain
}
