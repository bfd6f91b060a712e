package execlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// bundle is what setup gives a test: a Locker over its own redis-server processes.
type bundle struct {
	locker *Locker
	nodes  []*testenv.RedisNode
	// clients are the Locker's clients (built by NewClients); tests also read keys through them.
	clients []*redis.Client
}

// setup starts n redis-server processes for t and a Locker over them. mutate, when not nil,
// adjusts the Config before New.
func setup(t testing.TB, n int, mutate func(*Config)) *bundle {
	t.Helper()
	nodes := testenv.StartRedisNodes(t, n)
	addrs := make([]string, n)
	for i, nd := range nodes {
		addrs[i] = nd.Addr
	}
	clients, err := NewClients(addrs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeAll(clients) })
	cfg := &Config{Nodes: clients, NodeName: "test-node"}
	if mutate != nil {
		mutate(cfg)
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close) // before the clients close
	return &bundle{locker: l, nodes: nodes, clients: clients}
}

// holders returns how many nodes hold key with value. Nodes that do not answer count as not
// holding it.
func (b *bundle) holders(t *testing.T, key, value string) int {
	t.Helper()
	n := 0
	for _, c := range b.clients {
		got, err := c.Get(context.Background(), key).Result()
		if err == nil && got == value {
			n++
		}
	}
	return n
}

// present returns how many nodes have key, whatever its value.
func (b *bundle) present(t *testing.T, key string) int {
	t.Helper()
	n := 0
	for _, c := range b.clients {
		if c.Exists(context.Background(), key).Val() == 1 {
			n++
		}
	}
	return n
}

// mustLock returns a function that fails t unless err is nil: mustLock(t)(l.TryExec(...)).
func mustLock(t *testing.T) func(*Lock, error) *Lock {
	return func(lk *Lock, err error) *Lock {
		t.Helper()
		if err != nil {
			t.Fatalf("lock: %v", err)
		}
		return lk
	}
}

// wantErr fails t unless err wraps every one of targets.
func wantErr(t *testing.T, what string, err error, targets ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got nil error, want %v", what, targets)
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("%s: got %v, want it to wrap %v", what, err, target)
		}
	}
}

// timed runs f and returns how long it took.
func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// waitHolders waits until lk's value is on want nodes. Commands to the nodes a quorum did not
// need finish in the background (Locker.send), so a lock reaches every healthy node shortly after
// the call that took or extended it returned.
func waitHolders(t *testing.T, b *bundle, lk *Lock, want int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		got := b.holders(t, lk.Key(), lk.Value())
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s on %d nodes 2s after it was taken, want %d", lk.Key(), got, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// closeAll closes clients and returns their errors.
func closeAll(clients []*redis.Client) error {
	var errs []error
	for _, c := range clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// pendingCount returns how many deletes are pending or being sent.
func (j *janitor) pendingCount() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending) + j.out
}
