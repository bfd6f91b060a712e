package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
)

// Summary is a kind's jobs counted by state, with its total limit and how far behind it is. Counts and
// ages come from one statement, so they are consistent with each other; ages are measured on the
// database's clock.
type Summary struct {
	// Kind is the kind's name.
	Kind string
	// Waiting counts jobs not claimed and not finished: due, scheduled and retrying.
	Waiting int64
	// Due counts the waiting jobs that are due now: process_after (created_at when NULL) has passed.
	// They run as soon as their key's order and the limits allow.
	Due int64
	// Running counts claimed jobs.
	Running int64
	// Processed counts jobs finished successfully.
	Processed int64
	// Failed counts jobs failed for good, discarded ones included.
	Failed int64
	// MaxRunning is the total limit in force: limits.Unlimited when none is set, 0 when paused.
	MaxRunning int
	// Paused is whether the kind is paused.
	Paused bool
	// OldestWaiting is now minus the created_at of the oldest waiting job; 0 when none waits.
	OldestWaiting time.Duration
	// ScheduleLag is how overdue the most overdue due job is: now minus its process_after (its
	// created_at when NULL); 0 when none is due.
	ScheduleLag time.Duration
	// LockWaits lists the dispatchers in which the kind's keyed jobs wait for a quorum of Redis lock
	// nodes, oldest first (see LockWaits); empty while its lock calls succeed.
	LockWaits []LockWait
}

// Summarize counts the jobs of kind k. It reads the whole table once (a sequential scan on a large
// table), the kind's limits and its waits for Redis lock nodes.
func Summarize(ctx context.Context, db jobinfo.DB, k *Kind) (Summary, error) {
	lim, err := limits.Get(ctx, db, k.Name())
	if err != nil {
		return Summary{}, fmt.Errorf("admin: summarising kind %q: %w", k.Name(), err)
	}
	waits, err := LockWaits(ctx, db, k.Name())
	if err != nil {
		return Summary{}, err
	}
	return summarize(ctx, db, k, lim, waits[k.Name()])
}

// SummarizeAll summarises every registered kind, ordered by name. As with Kinds, a kind whose table
// is missing is left out and named in an error matching ErrTableMissing, returned with the summaries
// of the others.
func SummarizeAll(ctx context.Context, db jobinfo.DB) ([]Summary, error) {
	kinds, missing := Kinds(ctx, db)
	if missing != nil && !errors.Is(missing, ErrTableMissing) {
		return nil, missing
	}
	lims, _, err := limits.List(ctx, db, "")
	if err != nil {
		return nil, fmt.Errorf("admin: summarising kinds: %w", err)
	}
	waits, err := LockWaits(ctx, db, "")
	if err != nil {
		return nil, err
	}
	byName := make(map[string]limits.Kind, len(lims))
	for _, l := range lims {
		byName[l.Name] = l
	}
	out := make([]Summary, 0, len(kinds))
	for _, k := range kinds {
		// A kind registered after List ran has nothing stored: the zero limits.Kind says just that.
		s, err := summarize(ctx, db, k, byName[k.Name()], waits[k.Name()])
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, missing
}

func summarize(ctx context.Context, db jobinfo.DB, k *Kind, lim limits.Kind, waits []LockWait) (Summary, error) {
	s := Summary{Kind: k.Name(), MaxRunning: lim.EffectiveMaxRunning(), Paused: lim.Paused, LockWaits: waits}
	var oldest, lag int64
	err := db.QueryRow(ctx, summarySQL(k)).Scan(&s.Waiting, &s.Due, &s.Running, &s.Processed, &s.Failed, &oldest, &lag)
	if err != nil {
		return Summary{}, fmt.Errorf("admin: counting the jobs of kind %q: %w", k.Name(), err)
	}
	s.OldestWaiting = time.Duration(oldest) * time.Microsecond
	s.ScheduleLag = time.Duration(lag) * time.Microsecond
	return s, nil
}

// summarySQL counts the rows of each state in one pass (count(*) FILTER), and the two ages in
// microseconds, never negative.
func summarySQL(k *Kind) string { return k.statements().Summary }
