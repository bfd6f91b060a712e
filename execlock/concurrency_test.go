package execlock

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTryExecRace races 50 goroutines, released together, for one lock.
//
// With one node exactly one wins. With three, at most one wins each round, and often none: when
// the contenders' SET NX commands reach the nodes in different orders, each node may say yes to a
// different contender, nobody has a quorum, and all back off (Redlock's split vote). That is safe,
// and a dispatcher tries the key again the next time it looks at it, so there is no retry loop
// here. What must not happen is that the losers leave partial locks behind: checked after every
// round: redsync's clean-up round and the janitor's compare-and-delete must remove them.
//
// On an overloaded machine some attempts may miss CallTimeout (ErrUnavailable); they are counted
// and the round's checks still hold. Not parallel, like TestTryExecContention: 50 goroutines
// saturate a small machine (more so under -race), and other tests' nodes would then miss their
// deadlines.
func TestTryExecRace(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			b := setup(t, n, nil)
			l, ctx := b.locker, context.Background()
			const racers, rounds = 50, 10
			won, unavailable := 0, 0
			for round := range rounds {
				winners, unav := race(t, racers, func() (*Lock, error) { return l.TryExec(ctx, "pay", "order-1", 0) })
				unavailable += unav
				if len(winners) > 1 || (n == 1 && unav == 0 && len(winners) != 1) {
					t.Fatalf("round %d: %d winners (%d attempts unavailable)", round, len(winners), unav)
				}
				for _, w := range winners {
					won++
					if err := w.Release(ctx); err != nil {
						t.Fatal(err)
					}
				}
				// The losers' clean-up may still be in flight (bounded by CallTimeout); then
				// nothing may remain.
				waitGone(t, b, "jobpipe:lock:x:pay:order-1:0", 2*time.Second)
			}
			if n == 1 && won == 0 {
				t.Errorf("no winner in %d rounds with one node", rounds)
			}
			t.Logf("%d nodes: %d of %d rounds had a winner; %d attempts missed CallTimeout", n, won, rounds, unavailable)
		})
	}
}

// TestTryExecContention has 50 goroutines keep trying one lock, with a little jitter, until
// someone has held it for a while: exactly one ever gets it (it never releases), even with three
// nodes, where split votes delay the first win.
func TestTryExecContention(t *testing.T) {
	b := setup(t, 3, nil)
	l, ctx := b.locker, context.Background()
	var (
		wins, attempts, unavailable atomic.Int32
		wonAt                       atomic.Int64
		wg                          sync.WaitGroup
	)
	start := time.Now()
	giveUp := start.Add(10 * time.Second)
	more := func() bool { // keep trying until 300ms after the first win
		w := wonAt.Load()
		return time.Now().Before(giveUp) && (w == 0 || time.Since(time.Unix(0, w)) < 300*time.Millisecond)
	}
	for range 50 {
		wg.Go(func() {
			for more() {
				attempts.Add(1)
				_, err := l.TryExec(ctx, "pay", "order-9", 0)
				switch {
				case err == nil:
					if wins.Add(1) == 1 {
						wonAt.Store(time.Now().UnixNano())
					}
					return // holds the lock until the end of the test
				case errors.Is(err, ErrUnavailable):
					unavailable.Add(1)
				case !errors.Is(err, ErrTaken):
					t.Errorf("TryExec: %v, want ErrTaken", err)
					return
				}
				time.Sleep(time.Duration(1+mrand.IntN(10)) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if got := wins.Load(); got != 1 {
		t.Fatalf("%d goroutines got the lock, want exactly 1", got)
	}
	t.Logf("one winner after %v; %d attempts in all, %d missed CallTimeout",
		time.Unix(0, wonAt.Load()).Sub(start).Round(time.Millisecond), attempts.Load(), unavailable.Load())
}

// race starts n goroutines at once on try and returns the locks they got and how many attempts
// were unavailable.
func race(t *testing.T, n int, try func() (*Lock, error)) ([]*Lock, int) {
	t.Helper()
	var (
		mu          sync.Mutex
		winners     []*Lock
		unavailable int
		wg          sync.WaitGroup
		start       = make(chan struct{})
	)
	for range n {
		wg.Go(func() {
			<-start
			lk, err := try()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, lk)
			case errors.Is(err, ErrUnavailable):
				unavailable++
			case !errors.Is(err, ErrTaken):
				t.Errorf("%v, want ErrTaken", err)
			}
		})
	}
	close(start)
	wg.Wait()
	return winners, unavailable
}

// waitGone waits until key is on no node, and fails t if it stays longer than limit. A call
// returns once a quorum has answered; the other nodes' commands finish in the background.
func waitGone(t *testing.T, b *bundle, key string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for b.present(t, key) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("key %s still on %d nodes %v after the calls returned: a partial lock nobody holds",
				key, b.present(t, key), limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLockConcurrentUse has heartbeats and the finishing worker use one Lock at once (run with
// -race): the Lock serialises them and ends released.
func TestLockConcurrentUse(t *testing.T) {
	t.Parallel()
	b := setup(t, 3, nil)
	l, ctx := b.locker, context.Background()
	lk := mustLock(t)(l.TryExec(ctx, "pay", "order-2", 0))

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				err := lk.Extend(ctx)
				if err != nil && !errors.Is(err, ErrReleased) {
					t.Errorf("Extend: %v", err)
				}
				_ = lk.Until()
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	if err := lk.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
	wg.Wait()
	waitGone(t, b, lk.Key(), 2*time.Second)
}
