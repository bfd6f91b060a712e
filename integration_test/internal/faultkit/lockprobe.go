package faultkit

// Lock calls timed from the test process against a scenario's Redis nodes.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobpipe/jobpipe/execlock"
)

// LockProbe makes lock calls from the test process against a scenario's nodes, with the workers'
// client settings, TTL and call timeout, and times each: a TryExec, Extend and Release cycle every
// lockProbeEvery, on keys under a prefix of its own (which CheckQuiet does not look at).
type LockProbe struct {
	locker  *execlock.Locker
	clients []*redis.Client

	mu      sync.Mutex
	samples []lockSample

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// lockSample is one timed lock call.
type lockSample struct {
	At   time.Time // when it started
	Op   string
	Took time.Duration
	Err  error
}

const lockProbeEvery = 20 * time.Millisecond

// StartLockProbe starts probing addrs with locks of ttl (the workers' LeaseTTL, so that the call
// timeout is theirs too). It stops when t ends, if not before.
func StartLockProbe(t *testing.T, addrs []string, ttl time.Duration) *LockProbe {
	t.Helper()
	clients, err := execlock.NewClients(addrs...)
	if err != nil {
		t.Fatal(err)
	}
	locker, err := execlock.New(&execlock.Config{Nodes: clients, Prefix: "jpfrprobe:", NodeName: "probe", ExecTTL: ttl, QueueTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	p := &LockProbe{locker: locker, clients: clients, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	t.Cleanup(p.Stop)
	return p
}

// run is the probe's loop: a cycle every lockProbeEvery, over 8 keys, until Stop.
func (p *LockProbe) run() {
	defer close(p.done)
	ctx := context.Background()
	tick := time.NewTicker(lockProbeEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		var lk *execlock.Lock
		p.timed("TryExec", func() (err error) {
			lk, err = p.locker.TryExec(ctx, "probe", fmt.Sprint(i%8), 0)
			return err
		})
		if lk == nil {
			continue
		}
		p.timed("Extend", func() error { return lk.Extend(ctx) })
		p.timed("Release", func() error { return lk.Release(ctx) })
	}
}

// timed runs call and records how long it took and how it ended.
func (p *LockProbe) timed(op string, call func() error) {
	at := time.Now()
	err := call()
	s := lockSample{At: at, Op: op, Took: time.Since(at), Err: err}
	p.mu.Lock()
	p.samples = append(p.samples, s)
	p.mu.Unlock()
}

// Stop ends the probe and closes its locker and clients; a second Stop does nothing.
func (p *LockProbe) Stop() {
	p.stopOnce.Do(func() {
		close(p.stop)
		<-p.done
		p.locker.Close()
		for _, c := range p.clients {
			_ = c.Close()
		}
	})
}

// Between summarises the calls that started in [from, to).
func (p *LockProbe) Between(from, to time.Time) Latency {
	p.mu.Lock()
	defer p.mu.Unlock()
	var took []time.Duration
	failed := 0
	for _, s := range p.samples {
		if s.At.Before(from) || !s.At.Before(to) {
			continue
		}
		took = append(took, s.Took)
		if s.Err != nil {
			failed++
		}
	}
	return summarise(took, failed)
}
