package dispatcher

import "testing"

// A head's first slot is the free slot its position ranks, counting once the jobs claimed elsewhere
// since the heads query (in the fresh busy slots and still in the position); none when the key has
// fewer free slots than that.
func TestFirstSlot(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name            string
		busy, snapBusy  []int
		limit, pos, out int
	}{
		{"first of a free key", nil, nil, 3, 1, 0},
		{"third of a free key", nil, nil, 3, 3, 2},
		{"past the free slots", nil, nil, 3, 4, -1},
		{"skips busy slots", []int{0, 2}, []int{0, 2}, 4, 2, 3},
		{"one claimed elsewhere since", []int{0, 1}, []int{0}, 3, 2, 2},
		{"moved to the front by claims elsewhere", []int{0, 1}, nil, 3, 1, 2},
		{"no free slot left", []int{0, 1, 2}, []int{0}, 3, 1, -1},
		{"limit above the slots a key may hold", nil, nil, 1 << 20, 2, 1},
	} {
		h := head{busy: c.busy, snapBusy: c.snapBusy, limit: c.limit, pos: c.pos}
		if got := firstSlot(h); got != c.out {
			t.Errorf("%s: busy %v (was %v), limit %d, position %d: slot %d, want %d", c.name, c.busy, c.snapBusy, c.limit, c.pos, got, c.out)
		}
	}
}
