package execlock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestTryExecSlot(t *testing.T) {
	t.Parallel()
	for _, n := range nodeCounts {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			t.Parallel()
			b := setup(t, n, nil)
			l, ctx := b.locker, context.Background()

			// Four acquirers, limit 3: three get the three slots, the fourth is refused.
			var locks []*Lock
			var slots []int
			failed := 0
			for range 3 {
				lk := mustLock(t)(l.TryExecSlot(ctx, "sync", "shop-1", 3))
				locks = append(locks, lk)
				slots = append(slots, lk.Slot())
				failed += lk.FailedAttempts()
				if !strings.HasSuffix(lk.Key(), fmt.Sprintf(":x:sync:shop-1:%d", lk.Slot())) {
					t.Errorf("slot %d has key %q", lk.Slot(), lk.Key())
				}
			}
			slices.Sort(slots)
			if !slices.Equal(slots, []int{0, 1, 2}) {
				t.Fatalf("slots %v, want exactly [0 1 2]", slots)
			}
			_, err := l.TryExecSlot(ctx, "sync", "shop-1", 3)
			wantErr(t, "fourth acquirer", err, ErrTaken)
			if !strings.Contains(err.Error(), "all 3 slots") {
				t.Errorf("error %q does not say all slots are busy", err)
			}
			if s := l.Stats(); s.Acquired != 3 || s.Taken != uint64(failed+3) || s.Unavailable != 0 {
				t.Errorf("Stats() = %+v, want Acquired 3, Taken %d (failed attempts %d + 3 of the fourth)", s, failed+3, failed)
			}

			// A freed slot is found again, whatever the order.
			freed := locks[1]
			if err := freed.Release(ctx); err != nil {
				t.Fatal(err)
			}
			again := mustLock(t)(l.TryExecSlot(ctx, "sync", "shop-1", 3))
			if again.Slot() != freed.Slot() {
				t.Errorf("got slot %d, want the freed slot %d", again.Slot(), freed.Slot())
			}
			locks[1] = again

			// Slots the caller knows are busy are not tried.
			other := mustLock(t)(l.TryExecSlot(ctx, "sync", "shop-2", 3, 0, 2, 7, -1))
			if other.Slot() != 1 || other.FailedAttempts() != 0 {
				t.Errorf("with 0 and 2 busy: slot %d after %d failures, want slot 1 at once", other.Slot(), other.FailedAttempts())
			}
			before := l.Stats()
			_, err = l.TryExecSlot(ctx, "sync", "shop-3", 2, 0, 1)
			wantErr(t, "all slots busy by the caller's account", err, ErrTaken)
			if l.Stats() != before {
				t.Errorf("an all-busy search touched Redis: stats %+v -> %+v", before, l.Stats())
			}

			// Queue slots live apart from execution slots.
			q := mustLock(t)(l.TryQueueSlot(ctx, "sync", "shop-1", 1))
			if q.Slot() != 0 || !strings.Contains(q.Key(), ":q:sync:shop-1:0") {
				t.Errorf("queue slot %d key %q", q.Slot(), q.Key())
			}
			for _, lk := range append(locks, other, q) {
				if err := lk.Release(ctx); err != nil {
					t.Errorf("Release %s: %v", lk.Key(), err)
				}
			}
		})
	}
}

// TestSlotOrderIsRandom checks that free slots are taken in a random order, so that dispatchers
// do not all fight over slot 0 first.
func TestSlotOrderIsRandom(t *testing.T) {
	t.Parallel()
	b := setup(t, 1, nil)
	l, ctx := b.locker, context.Background()
	const runs = 60
	first := map[int]int{}
	for i := range runs {
		lk := mustLock(t)(l.TryExecSlot(ctx, "sync", fmt.Sprint("shop-", i), 3))
		first[lk.Slot()]++
		if err := lk.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Each slot is missed by all 60 runs with probability (2/3)^60, about 3e-11.
	for slot := range 3 {
		if first[slot] == 0 {
			t.Errorf("slot %d was never taken first in %d runs: %v", slot, runs, first)
		}
	}
	t.Logf("first slot taken over %d runs: %v", runs, first)
}
