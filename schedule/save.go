package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// Saved is what Save did.
type Saved struct {
	// Created reports that the schedule was new.
	Created bool
	// Rescheduled reports that its cron expression or zone changed, so next_run_at was computed
	// afresh from now: instants of the old spec that were not fired yet are dropped, and the new
	// spec's start at its first instant after now.
	Rescheduled bool
	// Changed reports that any part of its definition changed (always true when Created).
	Changed bool
	// NextRunAt is next_run_at after the save.
	NextRunAt time.Time
}

// Save stores s as the schedule of kind (a kind in jobpipe_kinds), with data (the job's data columns
// as a JSON object, for display; nil for none). A new schedule's next run is its first instant after
// now, by the database's clock. An existing one keeps its next_run_at, so that a restart continues
// where the schedule stood, unless its expression or zone changed (see Saved.Rescheduled).
func Save(ctx context.Context, db jobinfo.DB, kind string, s *Schedule, data json.RawMessage) (Saved, error) {
	var out Saved
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var err error
		out, err = save(ctx, tx, kind, s, data)
		return err
	})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23503" {
			return Saved{}, fmt.Errorf("schedule: save %q: kind %q is not in jobpipe_kinds: register the kind (a dispatcher does at Start) before its schedules: %w",
				s.spec.Name, kind, err)
		}
		return Saved{}, fmt.Errorf("schedule: save %q: %w", s.spec.Name, err)
	}
	return out, nil
}

func save(ctx context.Context, tx pgx.Tx, kind string, s *Schedule, data json.RawMessage) (Saved, error) {
	sp := s.spec
	var now time.Time
	if err := tx.QueryRow(ctx, dbNowSQL).Scan(&now); err != nil {
		return Saved{}, err
	}
	first, _ := s.after(now)
	var next time.Time
	err := tx.QueryRow(ctx, insertSQL, sp.Name, kind, sp.Cron, sp.TimeZone, string(sp.CatchUp), sp.Grace.Seconds(), jsonArg(data), first).Scan(&next)
	if err == nil {
		return Saved{Created: true, Changed: true, NextRunAt: next}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Saved{}, err
	}
	// The schedule exists (perhaps inserted by another node just now: ON CONFLICT waited for it).
	var old stateRow
	if err := tx.QueryRow(ctx, lockSQL, sp.Name).Scan(&old.kind, &old.cron, &old.zone, &old.catchUp, &old.grace, &old.next, &old.now); err != nil {
		return Saved{}, err
	}
	out := Saved{NextRunAt: old.next}
	if old.cron != sp.Cron || old.zone != sp.TimeZone {
		out.Rescheduled, out.NextRunAt = true, first
	}
	var updated time.Time
	err = tx.QueryRow(ctx, redefineSQL, sp.Name, kind, sp.Cron, sp.TimeZone, string(sp.CatchUp), sp.Grace.Seconds(), jsonArg(data), out.NextRunAt).Scan(&updated)
	switch {
	case err == nil:
		out.Changed = true
	case !errors.Is(err, pgx.ErrNoRows):
		return Saved{}, err
	}
	return out, nil
}

// stateRow is a schedule's row as lockSQL reads it.
type stateRow struct {
	kind, cron, zone, catchUp string
	grace                     float64
	next, now                 time.Time
}

// jsonArg passes data as jsonb, nil as NULL.
func jsonArg(data json.RawMessage) any {
	if data == nil {
		return nil
	}
	return string(data)
}
