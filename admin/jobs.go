package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
)

// Job is one row of a kind's table as an operator sees it.
type Job struct {
	// ID is the job's id.
	ID int64
	// State is derived from the pipeline columns as jobinfo.StateCondition defines it.
	State jobinfo.State
	// Data holds the data columns as one JSON object, in table order, each value as PostgreSQL
	// writes it in JSON (timestamps in ISO 8601, bytea as a "\\x..." hex string).
	Data json.RawMessage
	// Key is the job's key text as limits and locks name it (see jobinfo.Info.KeyText); "" for a
	// kind without key.
	Key string
	// AttemptsMade counts the attempts started.
	AttemptsMade int
	// MaxAttempts is the kind's max attempts as recorded in the registry.
	MaxAttempts int
	// CreatedAt and UpdatedAt are when the job was enqueued and when its row last changed.
	CreatedAt, UpdatedAt time.Time
	// ProcessAfter is the earliest start; nil means as soon as possible.
	ProcessAfter *time.Time
	// StartedAt is when the latest attempt started; nil if the job never started.
	StartedAt *time.Time
	// LeaseExpiresAt is set while the job runs: the rescuer takes the job back after it.
	LeaseExpiresAt *time.Time
	// ProcessedAt and FailedAt are set in the terminal states.
	ProcessedAt, FailedAt *time.Time
	// LeaseOwner is the dispatcher node that holds or last held the lease.
	LeaseOwner *string
	// LastError is the error of the latest failed attempt, or why the job was discarded.
	LastError *string
	// LockToken is the fencing token: every claim increments it.
	LockToken int64
	// LockSlot is the per-key slot the running job holds.
	LockSlot *int
}

// Filter selects the jobs ListJobs returns.
type Filter struct {
	// State keeps the jobs in this state; "" keeps every state.
	State jobinfo.State
	// Key keeps the jobs of one key, written as limits.NormalizeKey accepts it: the value for a
	// one-column key, a JSON array of the values for a longer one. "" keeps every key.
	Key string
	// Limit is how many jobs to return: DefaultLimit when 0, at most MaxLimit.
	Limit int
	// BeforeID pages: only jobs with a smaller id are returned. 0 starts from the newest.
	BeforeID int64
}

// The bounds of Filter.Limit.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
)

// ParseState reads a state name as the command line and the dashboard take it: waiting, running,
// processed or failed. "" gives "" (any state).
func ParseState(s string) (jobinfo.State, error) {
	if s == "" {
		return "", nil
	}
	for _, st := range jobinfo.States {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("%w state %q: use one of %s", ErrInvalid, s, stateNames())
}

func stateNames() string {
	names := make([]string, len(jobinfo.States))
	for i, s := range jobinfo.States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// ListJobs returns the jobs of kind k that f selects, newest first (id descending). To page, pass the
// last id returned as the next call's BeforeID.
func ListJobs(ctx context.Context, db jobinfo.DB, k *Kind, f Filter) ([]Job, error) {
	where, args, err := f.where(k)
	if err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	args = append(args, limit)
	q := fmt.Sprintf("%s\nWHERE %s\nORDER BY t.id DESC LIMIT $%d", selectJobs(k), where, len(args))
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("admin: listing the jobs of kind %q: %w", k.Name(), err)
	}
	jobs, err := pgx.CollectRows(rows, scanJob(k))
	if err != nil {
		return nil, fmt.Errorf("admin: listing the jobs of kind %q: %w", k.Name(), err)
	}
	return jobs, nil
}

// where checks f and returns its condition over the rows aliased t, with its parameters.
func (f Filter) where(k *Kind) (string, []any, error) {
	var errs []error
	conds, args := []string{"true"}, []any{}
	if f.State != "" {
		if jobinfo.StateCondition(f.State) == "" {
			errs = append(errs, fmt.Errorf("%w state %q: use one of %s", ErrInvalid, f.State, stateNames()))
		} else {
			conds = append(conds, stateCond("t", f.State))
		}
	}
	if f.Key != "" {
		key, err := normalizeKey(k, f.Key)
		if err != nil {
			errs = append(errs, err)
		} else {
			args = append(args, key)
			conds = append(conds, fmt.Sprintf("%s = $%d", keyText(k, "t"), len(args)))
		}
	}
	if f.Limit < 0 || f.Limit > MaxLimit {
		errs = append(errs, fmt.Errorf("%w limit %d: give 1 to %d (0 means %d)", ErrInvalid, f.Limit, MaxLimit, DefaultLimit))
	}
	if f.BeforeID < 0 {
		errs = append(errs, fmt.Errorf("%w before-id %d: job ids are positive (0 starts from the newest)", ErrInvalid, f.BeforeID))
	} else if f.BeforeID > 0 {
		args = append(args, f.BeforeID)
		conds = append(conds, fmt.Sprintf("t.id < $%d", len(args)))
	}
	if len(errs) > 0 {
		return "", nil, errors.Join(errs...)
	}
	return strings.Join(conds, " AND "), args, nil
}

// normalizeKey writes a key as the kind's key text, or says why it cannot be one.
func normalizeKey(k *Kind, value string) (string, error) {
	if len(k.Info.Key) == 0 {
		return "", fmt.Errorf("%w key %q: kind %q has no key, so its jobs cannot be selected by key", ErrInvalid, value, k.Name())
	}
	key, err := limits.NormalizeKey(k.Info.Key, value)
	if err != nil {
		return "", fmt.Errorf("%w key for kind %q: %w", ErrInvalid, k.Name(), err)
	}
	return key, nil
}

// GetJob returns job id of kind k, or an error matching ErrJobNotFound.
func GetJob(ctx context.Context, db jobinfo.DB, k *Kind, id int64) (Job, error) {
	rows, err := db.Query(ctx, selectJobs(k)+"\nWHERE t.id = $1", id)
	if err != nil {
		return Job{}, fmt.Errorf("admin: reading job %d of kind %q: %w", id, k.Name(), err)
	}
	job, err := pgx.CollectExactlyOneRow(rows, scanJob(k))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Job{}, fmt.Errorf("%w: kind %q has no job %d (finished jobs may have been pruned)", ErrJobNotFound, k.Name(), id)
	case err != nil:
		return Job{}, fmt.Errorf("admin: reading job %d of kind %q: %w", id, k.Name(), err)
	}
	return job, nil
}

// selectJobs selects what scanJob reads from the kind's rows, aliased t.
func selectJobs(k *Kind) string { return k.statements().Jobs }

func scanJob(k *Kind) pgx.RowToFunc[Job] {
	return func(r pgx.CollectableRow) (Job, error) {
		j := Job{MaxAttempts: k.Info.MaxAttempts}
		var data []byte
		err := r.Scan(&j.ID, &j.State, &data, &j.Key, &j.AttemptsMade, &j.CreatedAt, &j.UpdatedAt, &j.ProcessAfter,
			&j.StartedAt, &j.LeaseExpiresAt, &j.ProcessedAt, &j.FailedAt, &j.LeaseOwner, &j.LastError, &j.LockToken, &j.LockSlot)
		j.Data = data
		return j, err
	}
}
