package dispatcher

import (
	"slices"
	"testing"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// A claim pass reads again the slots held by its heads' keys' running jobs: each head gets its own
// key's, also when several heads share a key, and none for a key that runs nothing. A head of limit
// 1 keeps what the heads query saw.
func TestRefreshBusyReadsEachKeysSlots(t *testing.T) {
	t.Parallel()
	kind := jobinfo.MustDefine[keyedPlanJob]("busy_slots_job", jobinfo.KeyLimit(3))
	// Jobs 1-12: key g % 3, so key 1 holds jobs 1, 4, 7, 10, key 2 jobs 2, 5, 8, 11, key 0 the rest.
	db := planTable(t, kind, "INSERT INTO busy_slots_job (k, n) SELECT g %% 3, g FROM generate_series(1, %d) g", planMoment{jobs: 12})
	ctx := t.Context()
	// Key 1 runs jobs 1 and 4 on slots 2 and 0; key 2 runs nothing; key 0 runs job 3 on slot 1.
	startJobs(t, db, "busy_slots_job", "CASE id WHEN 1 THEN 2 WHEN 4 THEN 0 ELSE 1 END", 1, 4, 3)
	p := keyedProducer(kind.Info())
	hs := []head{
		{id: 7, limit: 3, busy: []int{9}}, {id: 10, limit: 3}, {id: 2, limit: 3, busy: []int{9}},
		{id: 6, limit: 3}, {id: 9, limit: 1, busy: []int{7}},
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := p.refreshBusy(ctx, tx, hs); err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]int{{0, 2}, {0, 2}, {}, {1}, {7}} {
		got := slices.Sorted(slices.Values(hs[i].busy))
		if !slices.Equal(got, want) {
			t.Errorf("head %d (job %d): busy slots %v, want %v", i, hs[i].id, got, want)
		}
	}
	if !slices.Equal(hs[0].snapBusy, []int{9}) {
		t.Errorf("head 0 kept %v of what the heads query saw, want [9]", hs[0].snapBusy)
	}
}
