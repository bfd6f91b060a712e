package execlock

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStalledNodeUnderLoadLeavesNoKey stops the only node for 3 s while 24 goroutines take and
// release execution locks on fresh keys, and checks that once the node is back and the calls have
// stopped, no key is left: every SET NX that the node ran late, after it resumed, was deleted.
// The node runs what was written to it during the stall out of order (connections it had
// accepted first), so a SET NX can land after the first delete meant to remove it: the janitor's
// confirmation removes it.
func TestStalledNodeUnderLoadLeavesNoKey(t *testing.T) {
	t.Parallel()
	b := setup(t, 1, nil)
	ctx := context.Background()
	node := b.nodes[0]
	var (
		stop             atomic.Bool
		wg               sync.WaitGroup
		acquired, failed atomic.Int64
	)
	for g := range 24 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				lk, err := b.locker.TryExec(ctx, "stall-load", strconv.Itoa(g)+"-"+strconv.Itoa(i), 0)
				if err != nil {
					failed.Add(1)
				} else {
					acquired.Add(1)
					_ = lk.Release(ctx)
				}
				time.Sleep(time.Duration(g) * time.Millisecond) // spread the calls out
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	node.Pause()
	t.Cleanup(node.Resume)
	time.Sleep(3 * time.Second)
	node.Resume()
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()
	if acquired.Load() == 0 || failed.Load() == 0 {
		t.Fatalf("%d locks acquired and %d attempts failed; want both: calls before and during the stall", acquired.Load(), failed.Load())
	}

	// The janitor retries every CallTimeout (1 s) and confirms a quarter of that later.
	deadline := time.Now().Add(4 * time.Second)
	for {
		keys, err := b.clients[0].Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 && b.locker.janitor.pendingCount() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keys left 4 s after the calls stopped (%d deletes pending), e.g. %v: locks that nobody holds",
				len(keys), b.locker.janitor.pendingCount(), keys[:min(3, len(keys))])
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d locks acquired, %d attempts failed; no key left", acquired.Load(), failed.Load())
}
