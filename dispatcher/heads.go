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

// headWalk is the most waiting jobs the fast head query walks per job wanted (see headsSQL), plus
// walkSlack for passes that want few jobs.
const (
	headWalk  = 4
	walkSlack = 100
)

// headPicker chooses the jobs of a keyed kind a claim may start (see headsSQL): a walk over the first
// waiting jobs, and the key scan for the rest when the walk falls short of them.
type headPicker struct {
	fast, scan, kind string
}

func newHeadPicker(info *jobinfo.Info, q kindSQL) headPicker {
	return headPicker{fast: q.headsFast, scan: q.headsScan, kind: info.Name}
}

// walk is how many waiting jobs the fast walk of a pass wanting n jobs looks at.
func walk(n int) int { return headWalk*n + walkSlack }

// pick locks up to n jobs that may start, in the kind's order: those the walk finds, and, when it
// finds fewer while more jobs wait beyond it, those the key scan finds besides. It also returns how
// many the walk found.
func (p *headPicker) pick(ctx context.Context, tx querier, n, keyLimit int) (heads []head, fromWalk int, err error) {
	w := walk(n)
	heads, walked, err := p.query(ctx, tx, p.fast, n, keyLimit, w, p.kind)
	if err != nil {
		return nil, 0, err
	}
	// A walk that ended before its limit passed every waiting job: its heads are all there are (the
	// key scan would skip the same locked rows).
	if len(heads) == n || (len(heads) > 0 && walked < w) {
		return heads, len(heads), nil
	}
	got := make([]int64, len(heads))
	for i, h := range heads {
		got[i] = h.id
	}
	more, _, err := p.query(ctx, tx, p.scan, n-len(heads), keyLimit, got, p.kind)
	return append(heads, more...), len(heads), err
}

// query runs a heads statement; walked is the count its rows end with (the fast walk's length; 0 for
// the key scan).
func (p *headPicker) query(ctx context.Context, tx querier, sql string, args ...any) (_ []head, walked int, _ error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("dispatcher: selecting %q jobs: %w", p.kind, err)
	}
	var walked64 int64
	heads, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (head, error) {
		var h head
		var busy []int32
		var limit int32
		var pos int64
		err := r.Scan(&h.id, &h.key, &busy, &limit, &pos, &h.first, &walked64)
		h.pos = int(pos)
		for _, b := range busy {
			h.busy = append(h.busy, int(b))
		}
		h.limit = int(limit)
		return h, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("dispatcher: selecting %q jobs: %w", p.kind, err)
	}
	return heads, int(walked64), nil
}

// HeadsPass is the pass a dispatcher's claim runs to choose the jobs of a keyed kind it may start
// (see the comment on headsSQL in queries.go). It is exported for benchmarks.
type HeadsPass struct{ p headPicker }

// NewHeadsPass returns the pass of a keyed kind.
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

// Walk is how many waiting jobs a pass wanting n jobs walks before it scans the keys.
func (h *HeadsPass) Walk(n int) int { return walk(n) }
