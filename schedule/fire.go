package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// EnqueueFunc enqueues a schedule's job for the instant at, inside tx, and returns its id (or the id
// of the waiting job it duplicated). The dispatcher's is dispatcher.EnqueueTx with the schedule's job.
type EnqueueFunc func(ctx context.Context, tx pgx.Tx, at time.Time) (jobID int64, err error)

// Firing is one instant fired and the job enqueued for it.
type Firing struct {
	// At is the instant.
	At time.Time
	// JobID is the job's id.
	JobID int64
}

// Round is what one call of Fire did.
type Round struct {
	// Fired lists the instants fired by this round, ascending.
	Fired []Firing
	// Plan is what the catch-up policy chose; its Fire may include instants found fired already,
	// which are not fired again.
	Plan Plan
	// Now is the database's time the round was computed at.
	Now time.Time
}

// Fire runs one round of schedule name in one transaction: it locks the schedule's row, computes the
// due instants from its next_run_at and spec as stored (Plan; at most max), and for each instant
// without a firing row it calls enqueue and records the firing; then it advances next_run_at. Either
// all of that commits or none of it, and the firing's primary key refuses a second firing of an
// instant, so an instant is never enqueued twice, whichever nodes call Fire and however often. If
// Round.Plan.More(Round.Now), instants are left for another round at once.
//
// When ctx has a deadline, the server ends the round's session should the round sit idle between its
// statements past it (see boundIdle), so that a caller frozen mid-round cannot hold the schedule's row.
func Fire(ctx context.Context, db jobinfo.DB, name string, max int, enqueue EnqueueFunc) (Round, error) {
	var r Round
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := boundIdle(ctx, tx); err != nil {
			return err
		}
		var err error
		r, err = fire(ctx, tx, name, max, enqueue)
		return err
	})
	if err != nil {
		return Round{}, fmt.Errorf("schedule: fire %q: %w", name, err)
	}
	return r, nil
}

// boundIdle limits how long the round's transaction may sit idle, waiting for its caller, to the time
// left before ctx's deadline. A caller frozen mid-round (its process stopped, its VM paused) can neither
// finish the round nor cancel it, and the lock on the schedule's row would keep every other node's
// rounds waiting until it woke: a leader replaced after its lease lapsed would still stop the schedule.
// Past the deadline the round is void anyway, so the server ending the session changes nothing else.
// Without a deadline the round is not bounded.
func boundIdle(ctx context.Context, tx pgx.Tx) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	ms := max(time.Until(deadline).Milliseconds(), 1)
	_, err := tx.Exec(ctx, idleTimeoutSQL, strconv.FormatInt(ms, 10))
	return err
}

func fire(ctx context.Context, tx pgx.Tx, name string, max int, enqueue EnqueueFunc) (Round, error) {
	var st stateRow
	err := tx.QueryRow(ctx, lockSQL, name).Scan(&st.kind, &st.cron, &st.zone, &st.catchUp, &st.grace, &st.next, &st.now)
	if errors.Is(err, pgx.ErrNoRows) {
		return Round{}, notFound(name)
	}
	if err != nil {
		return Round{}, err
	}
	// The row is the truth: a node whose code has another spec fires the one stored (the last
	// registered), so nodes of two releases never fire two specs at once.
	s, err := Parse(Spec{Name: name, Cron: st.cron, TimeZone: st.zone, CatchUp: CatchUp(st.catchUp), Grace: seconds(st.grace)})
	if err != nil {
		return Round{}, fmt.Errorf("the stored spec does not parse (was the row edited by hand?): %w", err)
	}
	plan := s.Plan(st.next, st.now, max)
	r := Round{Plan: plan, Now: st.now}
	if len(plan.Fire) > 0 {
		if r.Fired, err = fireInstants(ctx, tx, name, plan.Fire, enqueue); err != nil {
			return Round{}, err
		}
	}
	if len(r.Fired) == 0 && plan.Next.Equal(st.next) {
		return r, nil
	}
	var lastAt *time.Time
	var lastID *int64
	if n := len(r.Fired); n > 0 {
		lastAt, lastID = &r.Fired[n-1].At, &r.Fired[n-1].JobID
	}
	if _, err := tx.Exec(ctx, advanceSQL, name, plan.Next, lastAt, lastID); err != nil {
		return Round{}, err
	}
	if len(r.Fired) > 0 {
		if _, err := tx.Exec(ctx, trimSQL, name); err != nil {
			return Round{}, err
		}
	}
	return r, nil
}

// fireInstants enqueues a job for each of instants that has no firing yet, and records the firings.
func fireInstants(ctx context.Context, tx pgx.Tx, name string, instants []time.Time, enqueue EnqueueFunc) ([]Firing, error) {
	rows, err := tx.Query(ctx, firedSQL, name, instants)
	if err != nil {
		return nil, err
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return nil, err
	}
	var fired []Firing
	ats, ids := make([]time.Time, 0, len(instants)), make([]int64, 0, len(instants))
	for _, at := range instants {
		if slices.ContainsFunc(done, at.Equal) {
			continue
		}
		id, err := enqueue(ctx, tx, at)
		if err != nil {
			return nil, fmt.Errorf("enqueue for %s: %w", at.UTC().Format(time.RFC3339), err)
		}
		fired = append(fired, Firing{At: at, JobID: id})
		ats, ids = append(ats, at), append(ids, id)
	}
	if len(fired) > 0 {
		if _, err := tx.Exec(ctx, recordSQL, name, ats, ids); err != nil {
			return nil, err
		}
	}
	return fired, nil
}
