package execlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
)

var nodeCounts = []int{1, 3, 5}

func TestTryExec(t *testing.T) {
	t.Parallel()
	for _, n := range nodeCounts {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			t.Parallel()
			b := setup(t, n, nil)
			l, ctx := b.locker, context.Background()

			before := time.Now()
			a := mustLock(t)(l.TryExec(ctx, "email", "user-1", 0))
			if got, want := a.Key(), "jobpipe:lock:x:email:user-1:0"; got != want {
				t.Errorf("Key() = %q, want %q", got, want)
			}
			if !strings.HasPrefix(a.Value(), "test-node:") || len(a.Value()) < len("test-node:")+20 {
				t.Errorf("Value() = %q, want test-node:<random>", a.Value())
			}
			if u := a.Until(); !u.After(before) || u.After(before.Add(DefaultExecTTL)) {
				t.Errorf("Until() = %v, want within ExecTTL of %v", u, before)
			}
			if a.Slot() != 0 || a.FailedAttempts() != 0 {
				t.Errorf("Slot() %d, FailedAttempts() %d; want 0, 0", a.Slot(), a.FailedAttempts())
			}
			// On every node, not just on the quorum that answered first.
			waitHolders(t, b, a, n)

			_, err := l.TryExec(ctx, "email", "user-1", 0)
			wantErr(t, "second TryExec", err, ErrTaken)
			var taken *redsync.ErrTaken
			if !errors.As(err, &taken) || len(taken.Nodes) < l.Quorum() {
				t.Errorf("second TryExec: %v does not wrap redsync's *ErrTaken with a quorum of nodes", err)
			}
			if errors.Is(err, ErrUnavailable) {
				t.Errorf("contention reported as unavailability: %v", err)
			}

			other := mustLock(t)(l.TryExec(ctx, "email", "user-1", 1))
			otherKey := mustLock(t)(l.TryExec(ctx, "email", "user-2", 0))
			otherKind := mustLock(t)(l.TryExec(ctx, "sms", "user-1", 0))

			u1 := a.Until()
			time.Sleep(200 * time.Millisecond)
			extendStart := time.Now()
			if err := a.Extend(ctx); err != nil {
				t.Fatalf("Extend: %v", err)
			}
			if u2 := a.Until(); !u2.After(u1.Add(150 * time.Millisecond)) {
				t.Errorf("Extend moved Until from %v to %v, want about 200ms later", u1, u2)
			}
			// Every node extended, not just the quorum that answered first: a node left out shows
			// a TTL 200ms shorter.
			for i, c := range b.clients {
				deadline := time.Now().Add(time.Second)
				for {
					pttl := c.PTTL(ctx, a.Key()).Val()
					if pttl > DefaultExecTTL-time.Since(extendStart)-100*time.Millisecond {
						break // extended: not extended, it would be 200ms lower
					}
					if time.Now().After(deadline) {
						t.Errorf("node %d: PTTL %v 1s after Extend, want about %v", i, pttl, DefaultExecTTL)
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
			}

			if err := a.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if got := b.present(t, a.Key()); got > n-l.Quorum() {
				t.Errorf("key on %d nodes when Release returned, want at most %d", got, n-l.Quorum())
			}
			waitGone(t, b, a.Key(), 2*time.Second)
			if !a.Until().IsZero() {
				t.Errorf("Until() after Release = %v, want zero", a.Until())
			}
			if err := a.Release(ctx); err != nil {
				t.Errorf("second Release: %v, want nil", err)
			}
			wantErr(t, "Extend after Release", a.Extend(ctx), ErrReleased)

			again := mustLock(t)(l.TryExec(ctx, "email", "user-1", 0))
			for _, lk := range []*Lock{again, other, otherKey, otherKind} {
				if err := lk.Release(ctx); err != nil {
					t.Errorf("Release %s: %v", lk.Key(), err)
				}
			}

			want := Stats{Acquired: 5, Taken: 1, Extended: 1, Released: 5}
			if got := l.Stats(); got != want {
				t.Errorf("Stats() = %+v, want %+v", got, want)
			}
		})
	}
}

// TestExtendAfterExpiry lets a lock's TTL run out: Extend must report it lost and must not take
// it again (redsync's WithSetNXOnExtend would).
func TestExtendAfterExpiry(t *testing.T) {
	t.Parallel()
	const ttl = 600 * time.Millisecond
	for _, n := range nodeCounts {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			t.Parallel()
			const callTimeout = 250 * time.Millisecond
			b := setup(t, n, func(c *Config) { c.ExecTTL = ttl; c.CallTimeout = callTimeout })
			l, ctx := b.locker, context.Background()

			a := mustLock(t)(l.TryExec(ctx, "report", "acct-9", 0))
			// Past the key's expiry on every node, not just past Until: a node whose SET NX landed
			// late (at most CallTimeout after the call started) counts its TTL from then.
			time.Sleep(ttl + callTimeout + 50*time.Millisecond)
			err := a.Extend(ctx)
			wantErr(t, "Extend after the TTL", err, ErrLost)
			if errors.Is(err, ErrUnavailable) {
				t.Errorf("expiry reported as unavailability: %v", err)
			}
			if got := b.present(t, a.Key()); got != 0 {
				t.Fatalf("Extend re-created the lapsed lock on %d nodes", got)
			}
			if err2 := a.Extend(ctx); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("second Extend = %v, want the same loss %v", err2, err)
			}
			wantErr(t, "Release of the lapsed lock", a.Release(ctx), ErrLost)

			bl := mustLock(t)(l.TryExec(ctx, "report", "acct-9", 0))
			if err := bl.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if s := l.Stats(); s.ExtendFailed != 1 || s.ReleaseFailed != 1 {
				t.Errorf("Stats() = %+v, want ExtendFailed 1 (the second is the same loss) and ReleaseFailed 1", s)
			}
		})
	}
}

// TestExtendAfterKeyGone removes the lock's key behind the holder's back while Until is still in
// the future (as a node restarted empty would): Extend asks the nodes, reports the loss and does
// not take the lock again; Release does not delete the new holder's lock.
func TestExtendAfterKeyGone(t *testing.T) {
	t.Parallel()
	for _, n := range nodeCounts {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			t.Parallel()
			b := setup(t, n, nil)
			l, ctx := b.locker, context.Background()

			a := mustLock(t)(l.TryExec(ctx, "report", "acct-9", 2))
			waitHolders(t, b, a, n) // or its last SET NX could land after the DEL
			for _, c := range b.clients {
				c.Del(ctx, a.Key())
			}
			other := mustLock(t)(l.TryExec(ctx, "report", "acct-9", 2))
			waitHolders(t, b, other, n)

			until := a.Until()
			err := a.Extend(ctx)
			wantErr(t, "Extend", err, ErrLost)
			if errors.Is(err, ErrUnavailable) {
				t.Errorf("loss reported as unavailability: %v", err)
			}
			if !a.Until().Equal(until) || !until.After(time.Now()) {
				t.Errorf("Until() = %v after the failed Extend, want unchanged %v (still in the future)", a.Until(), until)
			}
			if got := b.holders(t, a.Key(), a.Value()); got != 0 {
				t.Errorf("Extend re-took the lock on %d nodes", got)
			}
			wantErr(t, "Release", a.Release(ctx), ErrLost)
			if got := b.holders(t, other.Key(), other.Value()); got != n {
				t.Errorf("new holder's lock on %d nodes after the old holder's Release, want %d", got, n)
			}
			if err := other.Extend(ctx); err != nil {
				t.Errorf("new holder's Extend: %v", err)
			}
			if err := other.Release(ctx); err != nil {
				t.Errorf("new holder's Release: %v", err)
			}
		})
	}
}

func TestQueueExecHandoff(t *testing.T) {
	t.Parallel()
	b := setup(t, 3, nil)
	l, ctx := b.locker, context.Background()

	// Dispatcher: queue lock; worker: execution lock; then the queue lock goes.
	q := mustLock(t)(l.TryQueue(ctx, "invoice", "cust-7", 0))
	if !strings.Contains(q.Key(), ":q:invoice:cust-7:0") {
		t.Errorf("queue lock key %q", q.Key())
	}
	if ttl := time.Until(q.Until()); ttl > DefaultQueueTTL || ttl < DefaultQueueTTL-time.Second {
		t.Errorf("queue lock valid for %v, want about QueueTTL %v", ttl, DefaultQueueTTL)
	}
	x := mustLock(t)(l.TryExec(ctx, "invoice", "cust-7", 0))
	_, err := l.TryQueue(ctx, "invoice", "cust-7", 0)
	wantErr(t, "TryQueue while queued", err, ErrTaken)
	if err := q.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// The next job of the key can be dispatched while the first runs, but cannot run.
	q2 := mustLock(t)(l.TryQueue(ctx, "invoice", "cust-7", 0))
	_, err = l.TryExec(ctx, "invoice", "cust-7", 0)
	wantErr(t, "TryExec while running", err, ErrTaken)

	// When the first job ends, the second starts.
	if err := x.Release(ctx); err != nil {
		t.Fatal(err)
	}
	x2 := mustLock(t)(l.TryExec(ctx, "invoice", "cust-7", 0))
	for _, lk := range []*Lock{q2, x2} {
		if err := lk.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReleaseCancelledContext(t *testing.T) {
	t.Parallel()
	b := setup(t, 3, nil)
	l := b.locker
	ctx, cancel := context.WithCancel(context.Background())
	lk := mustLock(t)(l.TryExec(ctx, "email", "user-5", 0))
	cancel()

	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release with a cancelled context: %v", err)
	}
	if got := b.present(t, lk.Key()); got > 1 {
		t.Fatalf("key still on %d of 3 nodes when Release returned, want at most 1", got)
	}
	waitGone(t, b, lk.Key(), 2*time.Second)
	wantErr(t, "TryExec with a cancelled context", func() error { _, err := l.TryExec(ctx, "email", "user-5", 0); return err }(), context.Canceled)
	if s := l.Stats(); s.Unavailable != 0 || s.Taken != 0 {
		t.Errorf("a cancelled attempt was counted: %+v", s)
	}
}

func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	l, err := New(&Config{Nodes: offlineClients(t, 1)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"kind with colon": func() error { _, err := l.TryExec(ctx, "a:b", "k", 0); return err },
		"empty kind":      func() error { _, err := l.TryQueue(ctx, "", "k", 0); return err },
		"negative slot":   func() error { _, err := l.TryExec(ctx, "a", "k", -1); return err },
		"zero limit":      func() error { _, err := l.TryExecSlot(ctx, "a", "k", 0); return err },
		"limit too large": func() error { _, err := l.TryQueueSlot(ctx, "a", "k", MaxLimit+1); return err },
		"slots bad kind":  func() error { _, err := l.TryExecSlot(ctx, "", "k", 3); return err },
	} {
		if err := call(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
