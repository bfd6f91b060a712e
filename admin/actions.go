package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/uniqueness"
)

// ActionResult says what Retry, Discard or RunNow did with each job it was given.
type ActionResult struct {
	// Changed lists the ids of the jobs changed, ascending.
	Changed []int64
	// Skipped lists the jobs left as they were, by id, with the reason.
	Skipped []Skipped
}

// Skipped is a job an action left as it was.
type Skipped struct {
	// ID is the job's id.
	ID int64
	// Reason says why: one of the Reason constants, or, for a retry refused by until-executed
	// uniqueness, which waiting job has the same unique fields.
	Reason string
}

// Why an action leaves a job as it was.
const (
	ReasonNoSuchJob      = "no such job"
	ReasonRunning        = "running"
	ReasonAlreadyWaiting = "already waiting"
	ReasonAlreadyDue     = "already due"
	ReasonProcessed      = "already processed"
	ReasonFailed         = "already failed"
	// ReasonDiscardRunning: a running job's worker holds the row's fencing token and decides its
	// outcome; it is never discarded.
	ReasonDiscardRunning = "running: a running job is never discarded; it ends on its own, or is retried when its lease expires"
	// ReasonChanged: the job qualified when the action started, but a dispatcher claimed or finished it
	// before the action could take its row.
	ReasonChanged = "changed meanwhile (claimed or finished by a dispatcher): look at the job again"
)

// DiscardedError is the last_error of a job discarded by Discard; a reason given is appended after
// ": ".
const DiscardedError = "discarded by an operator"

// Retry makes failed and processed jobs wait again, due now: failed_at, processed_at and lock_slot are
// cleared and process_after set to now. attempts_made is kept, as is last_error until the next
// attempt: a dispatcher fails a job whose attempt number (attempts_made after its claim) reaches the
// kind's max attempts, and the rescuer does the same, so a job that used up its attempts gets exactly
// one more, as when River or Sidekiq retry a dead job; a job with attempts left keeps those.
//
// Waiting jobs are skipped (ReasonAlreadyWaiting), running ones too (ReasonRunning). A failed job that
// never started (discarded while waiting) would count again for until-executed uniqueness, so it is
// skipped when a job with the same unique fields has not started either: two such jobs cannot wait at
// once.
func Retry(ctx context.Context, db jobinfo.DB, k *Kind, ids []int64) (ActionResult, error) {
	a := action{
		verb: "retry",
		sql:  k.statements().Retry,
		skip: func(st jobinfo.State, _ bool, dup *int64) string {
			switch {
			case st == jobinfo.StateWaiting:
				return ReasonAlreadyWaiting
			case st == jobinfo.StateRunning:
				return ReasonRunning
			case dup != nil:
				return fmt.Sprintf("job %d has the same unique fields and has not started: retrying this one too would make two", *dup)
			}
			return ReasonChanged
		},
	}
	return a.run(ctx, db, k, ids)
}

// Discard fails waiting jobs (due, scheduled or retrying) now, with last_error DiscardedError, followed
// by ": " and reason when one is given. Running jobs are never changed (ReasonDiscardRunning), and
// finished ones are skipped.
//
// Discarding is safe against a dispatcher claiming the same job: it is one UPDATE whose condition
// includes the waiting state, and PostgreSQL checks that condition again on the row's latest version
// after waiting for a claim's row lock, so a job claimed meanwhile is skipped (ReasonChanged) and keeps
// running.
func Discard(ctx context.Context, db jobinfo.DB, k *Kind, ids []int64, reason string) (ActionResult, error) {
	msg := DiscardedError
	if reason != "" {
		msg += ": " + reason
	}
	a := action{
		verb: "discard",
		sql:  k.statements().Discard,
		args: []any{msg},
		skip: func(st jobinfo.State, _ bool, _ *int64) string {
			switch st {
			case jobinfo.StateRunning:
				return ReasonDiscardRunning
			case jobinfo.StateProcessed:
				return ReasonProcessed
			case jobinfo.StateFailed:
				return ReasonFailed
			}
			return ReasonChanged
		},
	}
	return a.run(ctx, db, k, ids)
}

// RunNow makes waiting jobs that are not due yet (scheduled, or retrying after a backoff) due now:
// process_after is set to now. They still start in their key's order and within its limits. Jobs
// already due are skipped (ReasonAlreadyDue), as are running and finished ones.
func RunNow(ctx context.Context, db jobinfo.DB, k *Kind, ids []int64) (ActionResult, error) {
	a := action{
		verb: "run now",
		sql:  k.statements().RunNow,
		skip: func(st jobinfo.State, due bool, _ *int64) string {
			switch {
			case st == jobinfo.StateWaiting && due:
				return ReasonAlreadyDue
			case st == jobinfo.StateRunning:
				return ReasonRunning
			case st == jobinfo.StateProcessed:
				return ReasonProcessed
			case st == jobinfo.StateFailed:
				return ReasonFailed
			}
			return ReasonChanged
		},
	}
	return a.run(ctx, db, k, ids)
}

// action is one of the changes above: which rows change and how, and why the others do not.
type action struct {
	verb string
	// sql is the statement (kindsql.Admin's Retry, Discard or RunNow).
	sql string
	// args are the parameters from $4 on.
	args []any
	// skip gives the reason for a row that exists but did not change, from its state and whether it
	// was due when the statement started.
	skip func(st jobinfo.State, due bool, dup *int64) string
}

// run changes the rows in one statement and reads back, from the same statement's snapshot, the state
// of the others. The statement notifies uniqueness.NotifyChannel when it changed a row, so that the
// kind's dispatchers look for work at once: a retried or hurried job is due now, and a discarded one
// may have held back the later jobs of its key.
func (a action) run(ctx context.Context, db jobinfo.DB, k *Kind, ids []int64) (ActionResult, error) {
	if len(ids) == 0 {
		return ActionResult{}, fmt.Errorf("%w: no job ids given to %s", ErrInvalid, a.verb)
	}
	args := append([]any{ids, uniqueness.NotifyChannel, k.Name()}, a.args...)
	rows, err := db.Query(ctx, a.sql, args...)
	if err != nil {
		return ActionResult{}, a.wrap(k, err)
	}
	var res ActionResult
	var (
		id            int64
		changed, due  bool
		state         *string
		dupID         *int64
		notifyIgnored bool
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &changed, &state, &due, &dupID, &notifyIgnored}, func() error {
		switch {
		case changed:
			res.Changed = append(res.Changed, id)
		case state == nil:
			res.Skipped = append(res.Skipped, Skipped{ID: id, Reason: ReasonNoSuchJob})
		default:
			res.Skipped = append(res.Skipped, Skipped{ID: id, Reason: a.skip(jobinfo.State(*state), due, dupID)})
		}
		return nil
	})
	if err != nil {
		return ActionResult{}, a.wrap(k, err)
	}
	slices.Sort(res.Changed) // ordered already by the statement; kept sorted whatever the plan
	return res, nil
}

func (a action) wrap(k *Kind, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		// Only a retry can make a row count for until-executed uniqueness, and it skips the rows
		// that would; this is a job with the same unique fields enqueued while the statement ran.
		return fmt.Errorf("admin: %s of kind %q jobs: a job with the same unique fields was enqueued meanwhile (%s); nothing was changed, try again",
			a.verb, k.Name(), pgErr.Detail)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("admin: %s of kind %q jobs: %w", a.verb, k.Name(), err)
}

// retryBatch is how many failed jobs RetryAllFailed retries per statement: each is a short
// transaction that locks only its batch's rows.
const retryBatch = 1000

// RetryAllFailed retries (see Retry) every job of kind k that had failed when it started, in batches
// of 1000 by id, each its own statement, so no lock is held for long (unless db is a transaction).
// After each batch it calls progress, when not nil, with the jobs handled so far and the total counted
// first. It returns how many jobs were retried; failed jobs whose retry would duplicate a job that has
// not started are left failed.
func RetryAllFailed(ctx context.Context, db jobinfo.DB, k *Kind, progress func(done, total int64)) (int64, error) {
	q := k.statements()
	var total, maxID int64
	err := db.QueryRow(ctx, q.CountFailed).Scan(&total, &maxID)
	if err != nil {
		return 0, fmt.Errorf("admin: counting the failed jobs of kind %q: %w", k.Name(), err)
	}
	// Only ids up to the newest failed one at the start: jobs failing while this runs are left for
	// another run, and the batches end.
	next := q.NextFailed
	var done, retried, last int64
	for {
		rows, err := db.Query(ctx, next, last, maxID)
		if err != nil {
			return retried, fmt.Errorf("admin: reading the failed jobs of kind %q: %w", k.Name(), err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return retried, fmt.Errorf("admin: reading the failed jobs of kind %q: %w", k.Name(), err)
		}
		if len(ids) == 0 {
			return retried, nil
		}
		res, err := Retry(ctx, db, k, ids)
		if err != nil {
			return retried, err
		}
		retried += int64(len(res.Changed))
		done += int64(len(ids))
		last = ids[len(ids)-1]
		if progress != nil {
			// A job running when the total was counted may have failed since: never report more
			// done than the total.
			progress(done, max(total, done))
		}
		if len(ids) < retryBatch {
			return retried, nil
		}
	}
}
