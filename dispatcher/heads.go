package dispatcher

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// head is a waiting job chosen to start, with its key's limit and the slots its key's running jobs
// hold.
type head struct {
	id    int64
	key   string
	busy  []int // slots held by the key's running jobs, read again by refreshBusy
	limit int
	pos   int   // 1-based position among the key's waiting jobs, those being claimed elsewhere included
	first int64 // the key's first waiting job, claimed elsewhere or not
	// snapBusy is busy as the heads query saw it.
	snapBusy []int
}

// headWalk is the most waiting jobs the fast head query walks per job wanted (see headsSQL).
const headWalk = 4

// walkMargin is how much further than the last pass needed the next fast walk looks, so that a pass
// whose backlog is a little less fruitful than the last one's still finds every head in one walk.
const walkMargin = 1.5

// walkSlack is how many jobs a learned walk looks at beyond walkMargin's share, for passes that want
// few jobs. A large slack makes a pass that wants few heads of distinct keys walk several times the
// jobs it returns, and every job walked costs the same (docs/benchmarks.md, "Claim pass: walk and key
// scan"). A walk that falls short is repeated at
// the widest, so a smaller slack costs a second statement only when the backlog turned less
// fruitful than walkMargin allows for.
const walkSlack = 20

// headPicker chooses the jobs of a keyed kind a claim may start (see headsSQL), and learns how far
// its fast walk must look to find them.
//
// Every job a walk passes costs the same whether it turns out a head or not (its key's state is read,
// the row is fetched and sorted), so a walk of headWalk×n+100 jobs where n+100 would do costs several
// times what it must.
// The picker sizes each walk by how many jobs the last one passed per head it offered. A walk that
// falls short while there is more to walk is repeated at the widest before the key scan, whose
// cost grows with the number of keys, is tried.
type headPicker struct {
	fast, scan, kind string
	// perHead is how many waiting jobs the last fast walk passed per head it offered (at least 1,
	// at most headWalk); 0 before the first walk and after a walk that offered none.
	perHead float64
	// scanOnly is how many of the next passes go straight to the key scan (see scanStreak).
	scanOnly int
}

// scanStreak is how many passes after one whose walks found less than half its heads skip the walk
// and run only the key scan. Such a backlog's front is held by keys at their limit (their jobs are
// not heads), and the walk there only adds its cost to the scan's. The scan alone finds the same
// heads (every key's first heads, the first n of them in the kind's order), and running it alone
// there pays (docs/benchmarks.md, "Claim pass: walk and key scan"). Every
// scanStreak+1-th pass walks again, so a front that has cleared goes back to the walk, whose cost
// does not grow with the number of keys: a backlog whose front clears right after such a pass pays
// for at most scanStreak scans it did not need, each costing what that pass's scan did.
const scanStreak = 3

func newHeadPicker(info *jobinfo.Info, q kindSQL) headPicker {
	return headPicker{fast: q.headsFast, scan: q.headsScan, kind: info.Name}
}

// widest is the longest fast walk of a pass wanting n jobs.
func widest(n int) int { return headWalk*n + 100 }

// walk is how many waiting jobs the next fast walk of a pass wanting n jobs looks at.
func (p *headPicker) walk(n int) int {
	if p.perHead == 0 || p.perHead >= headWalk {
		// Nothing learned, or heads as sparse as a walk is ever allowed to find them.
		return widest(n)
	}
	return min(widest(n), int(p.perHead*walkMargin*float64(n))+walkSlack)
}

// pick locks up to n jobs that may start: a fast walk, the widest walk when a shorter one fell short
// of the backlog, and the key scan when that falls short too; or the key scan alone, in the
// scanStreak passes after one whose walks found less than half its heads. It returns them in the
// kind's order, and how many the walks found.
func (p *headPicker) pick(ctx context.Context, tx querier, n, keyLimit int) (heads []head, fromWalk int, err error) {
	if p.scanOnly > 0 {
		p.scanOnly--
		heads, _, _, err := p.query(ctx, tx, p.scan, n, keyLimit, []int64{}, p.kind)
		return heads, 0, err
	}
	walk := p.walk(n)
	heads, walked, picked, err := p.walkHeads(ctx, tx, n, keyLimit, walk)
	if err == nil && len(heads) < n && walked == walk && walk < widest(n) {
		// The rows the short walk locked are this transaction's, which SKIP LOCKED does not skip: the
		// wide walk returns them again, in their place in the order.
		walk = widest(n)
		heads, walked, picked, err = p.walkHeads(ctx, tx, n, keyLimit, walk)
	}
	if err != nil {
		return nil, 0, err
	}
	p.learn(n, len(heads), walked, picked)
	// A walk that ended before its limit passed every waiting job: its heads are all there are (the
	// key scan would skip the same locked rows).
	if len(heads) == n || walked < walk {
		return heads, len(heads), nil
	}
	if 2*len(heads) < n {
		p.scanOnly = scanStreak
	}
	got := make([]int64, len(heads))
	for i, h := range heads {
		got[i] = h.id
	}
	more, _, _, err := p.query(ctx, tx, p.scan, n-len(heads), keyLimit, got, p.kind)
	return append(heads, more...), len(heads), err
}

// learn sets perHead from a pass that wanted n jobs and got got of them from a walk that passed
// walked waiting jobs and found picked heads among them (before those locked elsewhere were skipped).
// A full pass learns how many jobs the walk passed per head; one that fell short, per head it could
// lock, which makes up for the heads other dispatchers held.
func (p *headPicker) learn(n, got, walked, picked int) {
	switch {
	case got == 0:
		p.perHead = 0
	case got == n:
		p.perHead = min(max(float64(walked)/float64(picked), 1), headWalk)
	default:
		p.perHead = min(max(float64(walked)/float64(got), 1), headWalk)
	}
}

// walkHeads runs the fast walk over up to walk waiting jobs. walked is how many it passed and picked
// how many of them were heads; when it returns no row it cannot tell, and says walk and 0.
func (p *headPicker) walkHeads(ctx context.Context, tx querier, n, keyLimit, walk int) (heads []head, walked, picked int, err error) {
	heads, walked, picked, err = p.query(ctx, tx, p.fast, n, keyLimit, walk, p.kind)
	if len(heads) == 0 {
		walked = walk
	}
	return heads, walked, picked, err
}

// query runs a heads statement; walked and picked are the counts its rows end with (the fast walk's
// length and the heads it found; 0 for the key scan).
func (p *headPicker) query(ctx context.Context, tx querier, sql string, args ...any) (_ []head, walked, picked int, _ error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("dispatcher: selecting %q jobs: %w", p.kind, err)
	}
	var walked64, picked64 int64
	heads, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (head, error) {
		var h head
		var busy []int32
		var limit int32
		var pos int64
		err := r.Scan(&h.id, &h.key, &busy, &limit, &pos, &h.first, &walked64, &picked64)
		h.pos = int(pos)
		for _, b := range busy {
			h.busy = append(h.busy, int(b))
		}
		h.limit = int(limit)
		return h, err
	})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("dispatcher: selecting %q jobs: %w", p.kind, err)
	}
	return heads, int(walked64), int(picked64), nil
}

// HeadsPass is the pass a dispatcher's claim runs to choose the jobs of a keyed kind it may start
// (see the comment on headsSQL in queries.go), with the walk length it has learned so far. It is
// exported for benchmarks; a dispatcher keeps one per keyed kind. Not safe for concurrent use.
type HeadsPass struct{ p headPicker }

// NewHeadsPass returns the pass of a keyed kind, before it has learned anything (its first walk is
// the widest).
func NewHeadsPass(info *jobinfo.Info) (*HeadsPass, error) {
	if len(info.Key) == 0 {
		return nil, fmt.Errorf("dispatcher: kind %q has no concurrency key: its jobs are claimed without a heads pass", info.Name)
	}
	return &HeadsPass{p: newHeadPicker(info, buildSQL(info))}, nil
}

// Select locks, in tx, up to n jobs that may start with the kind's per-key limit keyLimit, and
// returns their ids and key texts in the kind's order, and how many of them the fast walk found (the
// rest came from the key scan). Run it in a transaction and roll back to leave the jobs waiting.
func (h *HeadsPass) Select(ctx context.Context, tx pgx.Tx, n, keyLimit int) (ids []int64, keys []string, fromWalk int, err error) {
	if n <= 0 {
		return nil, nil, 0, errors.New("dispatcher: HeadsPass.Select: n must be at least 1")
	}
	heads, fromWalk, err := h.p.pick(ctx, tx, n, keyLimit)
	for _, hd := range heads {
		ids, keys = append(ids, hd.id), append(keys, hd.key)
	}
	return ids, keys, fromWalk, err
}

// Walk is how many waiting jobs the next pass wanting n jobs walks first, when it walks: after a pass
// whose walks found less than half its heads, the next three run the key scan alone.
func (h *HeadsPass) Walk(n int) int { return h.p.walk(n) }
