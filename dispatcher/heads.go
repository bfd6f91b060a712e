package dispatcher

import (
	"context"
	"fmt"

	"github.com/jobpipe/jobpipe/internal/heads"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// head is a waiting job chosen to start (see heads.Head), with its key's limit and the slots its
// key's running jobs hold.
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

// headPicker chooses the jobs of a keyed kind a claim may start: the heads pass of package heads,
// a walk over the first waiting jobs, and the key scan for the rest when the walk falls short of
// them.
type headPicker struct{ pass *heads.Pass }

func newHeadPicker(info *jobinfo.Info) (headPicker, error) {
	pass, err := heads.New(info)
	if err != nil {
		return headPicker{}, fmt.Errorf("dispatcher: %w", err)
	}
	return headPicker{pass: pass}, nil
}

// pick chooses up to n jobs that may start, in the kind's order (see heads.Pass.Pick). It also returns
// how many the walk found.
func (p *headPicker) pick(ctx context.Context, tx querier, n, keyLimit int) (_ []head, fromWalk int, _ error) {
	picked, fromWalk, err := p.pass.Pick(ctx, tx, n, keyLimit)
	if err != nil {
		return nil, 0, fmt.Errorf("dispatcher: %w", err)
	}
	hs := make([]head, len(picked))
	for i, h := range picked {
		hs[i] = head{id: h.ID, key: h.Key, busy: h.Busy, limit: h.Limit, pos: h.Pos, first: h.First}
	}
	return hs, fromWalk, nil
}
