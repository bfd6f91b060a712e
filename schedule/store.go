package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// Stored is a schedule as jobpipe_schedules holds it.
type Stored struct {
	// Name is the schedule's name.
	Name string
	// Kind is the kind whose job it enqueues.
	Kind string
	// Cron is the cron expression, without zone prefix.
	Cron string
	// TimeZone is the zone the expression is read in.
	TimeZone string
	// CatchUp is the catch-up policy.
	CatchUp CatchUp
	// Grace is how late an instant may fire and still count as on time.
	Grace time.Duration
	// Data is the job's data columns as a JSON object, as the last node to register the schedule
	// had it; nil when it could not be written as JSON. For display only.
	Data json.RawMessage
	// NextRunAt is the earliest instant not yet fired or skipped.
	NextRunAt time.Time
	// LastRunAt is the latest instant fired, nil before the first firing.
	LastRunAt *time.Time
	// LastJobID is the job enqueued for LastRunAt (or the waiting job it duplicated).
	LastJobID *int64
	// CreatedAt is when the schedule was first registered; UpdatedAt when its definition last changed.
	CreatedAt, UpdatedAt time.Time
}

// Spec returns the stored definition as a Spec.
func (s Stored) Spec() Spec {
	return Spec{Name: s.Name, Cron: s.Cron, TimeZone: s.TimeZone, CatchUp: s.CatchUp, Grace: s.Grace}
}

// List returns every stored schedule, by name.
func List(ctx context.Context, db jobinfo.DB) ([]Stored, error) {
	rows, err := db.Query(ctx, listSQL)
	if err != nil {
		return nil, fmt.Errorf("schedule: list: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanStored)
	if err != nil {
		return nil, fmt.Errorf("schedule: list: %w", err)
	}
	return out, nil
}

// Get returns the stored schedule name, or ErrNotFound.
func Get(ctx context.Context, db jobinfo.DB, name string) (Stored, error) {
	rows, err := db.Query(ctx, getSQL, name)
	if err != nil {
		return Stored{}, fmt.Errorf("schedule: get %q: %w", name, err)
	}
	s, err := pgx.CollectExactlyOneRow(rows, scanStored)
	if errors.Is(err, pgx.ErrNoRows) {
		return Stored{}, notFound(name)
	}
	if err != nil {
		return Stored{}, fmt.Errorf("schedule: get %q: %w", name, err)
	}
	return s, nil
}

// Delete removes the stored schedule name and its firings, or returns ErrNotFound. A dispatcher that
// still registers it stores it again when it starts.
func Delete(ctx context.Context, db jobinfo.DB, name string) error {
	tag, err := db.Exec(ctx, deleteSQL, name)
	if err != nil {
		return fmt.Errorf("schedule: delete %q: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return notFound(name)
	}
	return nil
}

func notFound(name string) error {
	return fmt.Errorf("%w: no schedule %q in jobpipe_schedules (a dispatcher stores its schedules when it starts)", ErrNotFound, name)
}

func scanStored(row pgx.CollectableRow) (Stored, error) {
	var s Stored
	var grace float64
	var catchUp string
	err := row.Scan(&s.Name, &s.Kind, &s.Cron, &s.TimeZone, &catchUp, &grace, &s.Data, &s.NextRunAt, &s.LastRunAt,
		&s.LastJobID, &s.CreatedAt, &s.UpdatedAt)
	s.CatchUp, s.Grace = CatchUp(catchUp), seconds(grace)
	return s, err
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
