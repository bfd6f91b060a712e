package dispatcher

import (
	"testing"

	"github.com/jobpipe/jobpipe/execlock"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// A claim pass whose heads of keys that run come in the kind's order, keys interleaved, locks as
// many of each key's next jobs as that key has heads with a queue lock: every head keeps its lock
// and takes its key's next job in order.
func TestLockNextOfKeysLocksEachKeysHeads(t *testing.T) {
	t.Parallel()
	kind := jobinfo.MustDefine[keyedPlanJob]("next_of_keys_job", jobinfo.KeyLimit(3))
	// Jobs 1-12: key g % 3, so key 1 holds jobs 1, 4, 7, 10, key 2 jobs 2, 5, 8, 11, key 0 the rest.
	db := planTable(t, kind, "INSERT INTO next_of_keys_job (k, n) SELECT g %% 3, g FROM generate_series(1, %d) g", planMoment{jobs: 12})
	ctx := t.Context()
	// Each key runs its first job on slot 0.
	startJobs(t, db, "next_of_keys_job", "0", 1, 2, 3)
	r := testenv.NewRedis(t)
	locker, err := execlock.New(&execlock.Config{Nodes: r.Clients, Prefix: r.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(locker.Close)
	p := keyedProducer(kind.Info())
	// Two heads a key, in the kind's order: keys 1, 2, 0, 1, 2, 0.
	heads := []head{
		{id: 4, key: "1"}, {id: 5, key: "2"}, {id: 6, key: "0"},
		{id: 7, key: "1"}, {id: 8, key: "2"}, {id: 9, key: "0"},
	}
	locks := make([]*execlock.Lock, len(heads))
	for i := range heads {
		heads[i].limit, heads[i].busy, heads[i].snapBusy = 3, []int{0}, []int{0}
		if locks[i], err = locker.TryQueue(ctx, kind.Info().Name, heads[i].key, 1+i/3); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := p.lockNextOfKeys(ctx, tx, heads, locks); err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ id, first int64 }{{4, 4}, {5, 5}, {6, 6}, {7, 4}, {8, 5}, {9, 6}} {
		if locks[i] == nil || heads[i].id != want.id || heads[i].first != want.first {
			t.Errorf("head %d (key %s): job %d after key's first %d, lock kept %v; want job %d after %d, lock kept",
				i, heads[i].key, heads[i].id, heads[i].first, locks[i] != nil, want.id, want.first)
		}
	}
}
