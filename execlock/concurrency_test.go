package execlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestTryExecRace races 50 goroutines for one lock. With one node exactly one wins. With three,
// at most one wins each round, but a round can have no winner: when each contender's SET NX
// reaches a different node first, nobody gets a quorum (Redlock's split vote) and all back off.
// That is safe, and it is why a busy key needs no retry loop here: the dispatcher tries it again
// when it next looks at the key.
func TestTryExecRace(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			t.Parallel()
			b := setup(t, n, nil)
			l, ctx := b.locker, context.Background()
			const racers, rounds = 50, 5
			won := 0
			for round := range rounds {
				var (
					mu      sync.Mutex
					winners []*Lock
					wg      sync.WaitGroup
					start   = make(chan struct{})
				)
				for range racers {
					wg.Go(func() {
						<-start
						lk, err := l.TryExec(ctx, "pay", "order-1", 0)
						if err != nil {
							if !errors.Is(err, ErrTaken) {
								t.Errorf("round %d: %v, want ErrTaken", round, err)
							}
							return
						}
						mu.Lock()
						winners = append(winners, lk)
						mu.Unlock()
					})
				}
				close(start)
				wg.Wait()
				if len(winners) > 1 || (n == 1 && len(winners) != 1) {
					t.Fatalf("round %d: %d winners", round, len(winners))
				}
				for _, w := range winners {
					won++
					if err := w.Release(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			if won == 0 {
				t.Errorf("no winner in %d rounds", rounds)
			}
			t.Logf("%d nodes: %d of %d rounds had a winner", n, won, rounds)
			if got := b.present(t, "jobpipe:lock:x:pay:order-1:0"); got != 0 {
				t.Errorf("after the races the key is on %d nodes", got)
			}
		})
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
	keepAlive := make(chan error, 1)
	wg.Go(func() { keepAlive <- lk.KeepAlive(ctx, time.Millisecond) })
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
	if err := <-keepAlive; err != nil {
		t.Errorf("KeepAlive after Release = %v, want nil", err)
	}
	if got := b.present(t, lk.Key()); got != 0 {
		t.Errorf("key on %d nodes after Release", got)
	}
}

func TestKeepAlive(t *testing.T) {
	t.Parallel()
	const ttl = 300 * time.Millisecond
	b := setup(t, 3, func(c *Config) { c.ExecTTL = ttl })
	l, ctx := b.locker, context.Background()

	t.Run("holds past the TTL until cancelled", func(t *testing.T) {
		lk := mustLock(t)(l.TryExec(ctx, "pay", "order-3", 0))
		hbCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- lk.KeepAlive(hbCtx, 0) }() // every ttl/3
		time.Sleep(3 * ttl)
		if got := b.holders(t, lk.Key(), lk.Value()); got != 3 {
			t.Errorf("after 3 TTLs of heartbeats the lock is on %d nodes, want 3", got)
		}
		if !lk.Until().After(time.Now()) {
			t.Errorf("Until() = %v, want in the future", lk.Until())
		}
		stop()
		if err := <-done; err != nil {
			t.Errorf("KeepAlive after cancel = %v, want nil", err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Error(err)
		}
	})

	t.Run("reports a loss", func(t *testing.T) {
		lk := mustLock(t)(l.TryExec(ctx, "pay", "order-4", 0))
		done := make(chan error, 1)
		go func() { done <- lk.KeepAlive(ctx, 20*time.Millisecond) }()
		for _, c := range b.clients {
			c.Del(ctx, lk.Key())
		}
		select {
		case err := <-done:
			wantErr(t, "KeepAlive", err, ErrLost)
		case <-time.After(time.Second):
			t.Fatal("KeepAlive did not report the loss within 1s")
		}
		wantErr(t, "Release", lk.Release(ctx), ErrLost)
	})
}
