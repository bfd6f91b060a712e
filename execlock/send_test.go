package execlock

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestLocksReachEveryNode takes and releases many locks on three nodes, through two Lockers that
// share the clients. redsync's fail-fast round returns once two nodes have answered and an acquire
// then cancels its round's context; unless Locker.send runs each command to the call's deadline,
// about one lock in fifty never reaches the third node. Each lock must reach every node, and each
// release must leave none.
func TestLocksReachEveryNode(t *testing.T) {
	t.Parallel()
	b := setup(t, 3, nil)
	second, err := New(&Config{Nodes: b.clients, NodeName: "second"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.Close)
	ctx := context.Background()
	const n = 200
	locks := make([]*Lock, 0, n)
	for i := range n {
		l := b.locker
		if i%2 == 1 {
			l = second
		}
		locks = append(locks, mustLock(t)(l.TryExec(ctx, "every", strconv.Itoa(i), 0)))
	}
	for _, lk := range locks {
		waitHolders(t, b, lk, 3)
		if err := lk.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, lk := range locks {
		waitGone(t, b, lk.Key(), 2*time.Second)
	}

}
