// Package heads chooses the jobs of a keyed kind that a claim may start: its statements (Queries)
// and the pass that runs them (Pass). The dispatcher's claims run it, and the select benchmark runs
// the same pass and statements alone to measure them. It is internal so that package dispatcher's
// API carries none of it.
//
// Its errors carry no package prefix: the dispatcher wraps them as its own.
package heads

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// Head is a waiting job chosen to start, with its key's limit and the slots its key's running jobs
// hold.
type Head struct {
	ID    int64
	Key   string // the key's text (jobinfo.Info.KeyText)
	Busy  []int  // slots held by the key's running jobs
	Limit int    // the key's limit: its override, else the kind's per-key limit; 0 when paused
	Pos   int    // 1-based position among the key's waiting jobs, those being claimed elsewhere included
	First int64  // the key's first waiting job, claimed elsewhere or not
}

// headWalk is the most waiting jobs the longer walk looks at per job wanted (see headsSQL), plus
// walkSlack for passes that want few jobs.
const (
	headWalk  = 4
	walkSlack = 100
)

// Walk is how many waiting jobs the longer walk of a pass wanting n jobs looks at (see Pass.Pick).
func Walk(n int) int { return headWalk*n + walkSlack }

// Querier is a pool, a connection or a transaction; Pick's statements lock rows, so give it a
// transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Pass is a keyed kind's heads pass: a walk over the first waiting jobs, and the key scan for the
// rest when the walk falls short of them. Its statements are built once, by New.
type Pass struct {
	fast, scan, kind string
}

// New returns the pass of a keyed kind.
func New(info *jobinfo.Info) (*Pass, error) {
	if len(info.Key) == 0 {
		return nil, fmt.Errorf("kind %q has no concurrency key: its jobs are claimed without a heads pass", info.Name)
	}
	fast, scan := Queries(info)
	return &Pass{fast: fast, scan: scan, kind: info.Name}, nil
}

// Pick chooses, in q, up to n jobs that may start with the kind's per-key limit keyLimit, in the kind's
// order: those the walks find, and, when they find fewer while more jobs wait beyond them, those the
// key scan finds besides, and locks those of keys that run nothing (see headsSQL). It also returns
// how many the walks found. Roll the transaction back to leave the jobs waiting.
//
// The first walk looks at n jobs only: over many keys of few jobs each they are all heads, and the
// pass is done at a fraction of the longer walk's cost. When it finds fewer, the walk of Walk(n)
// jobs follows, and it finds the first walk's heads again, as they come first in the kind's order.
func (p *Pass) Pick(ctx context.Context, q Querier, n, keyLimit int) (heads []Head, fromWalk int, err error) {
	for _, w := range []int{n, Walk(n)} {
		var walked int
		heads, walked, err = p.query(ctx, q, p.fast, n, keyLimit, w, p.kind)
		if err != nil {
			return nil, 0, err
		}
		// A walk that ended before its limit passed every waiting job: its heads are all there are
		// (the key scan would skip the same locked rows).
		if len(heads) == n || (len(heads) > 0 && walked < w) {
			return heads, len(heads), nil
		}
	}
	got := make([]int64, len(heads))
	for i, h := range heads {
		got[i] = h.ID
	}
	more, _, err := p.query(ctx, q, p.scan, n-len(heads), keyLimit, got, p.kind)
	return append(heads, more...), len(heads), err
}

// query runs a heads statement; walked is the count its rows end with (the fast walk's length; 0 for
// the key scan).
func (p *Pass) query(ctx context.Context, q Querier, sql string, args ...any) (_ []Head, walked int, _ error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("selecting %q jobs: %w", p.kind, err)
	}
	var walked64 int64
	heads, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Head, error) {
		var h Head
		var busy []int32
		var limit int32
		var pos int64
		err := r.Scan(&h.ID, &h.Key, &busy, &limit, &pos, &h.First, &walked64)
		h.Pos = int(pos)
		for _, b := range busy {
			h.Busy = append(h.Busy, int(b))
		}
		h.Limit = int(limit)
		return h, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("selecting %q jobs: %w", p.kind, err)
	}
	return heads, int(walked64), nil
}
