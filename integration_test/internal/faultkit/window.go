package faultkit

// Measured windows of a scenario, on the database's clock, and their throughput from the ledger.

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Window is a stretch of a scenario on the database's clock.
type Window struct{ From, To time.Time }

// Rate is LedgerRate over w of each ledger kind, summed.
func (w Window) Rate(t *testing.T, db *pgxpool.Pool, ledgerKinds ...string) float64 {
	t.Helper()
	sum := 0.0
	for _, k := range ledgerKinds {
		sum += LedgerRate(t, db, k, w.From, w.To)
	}
	return sum
}

// Measure waits d and returns the window it lasted.
func Measure(t *testing.T, e *World, d time.Duration) Window {
	t.Helper()
	from := e.Now(t)
	time.Sleep(d)
	return Window{From: from, To: e.Now(t)}
}

// SinceOrZero is how long after from the time at was, 0 if there is none.
func SinceOrZero(at *time.Time, from time.Time) time.Duration {
	if at == nil {
		return 0
	}
	return at.Sub(from)
}

// SleepUntil waits until the database's clock reaches at.
func SleepUntil(t *testing.T, e *World, at time.Time) {
	t.Helper()
	if d := at.Sub(e.Now(t)); d > 0 {
		time.Sleep(d)
	}
}

// LedgerRate is how many handler calls of ledgerKind ("" for the keyed kind) ended with "ok" per
// second in [from, to), on the database's clock.
func LedgerRate(t *testing.T, db *pgxpool.Pool, ledgerKind string, from, to time.Time) float64 {
	t.Helper()
	var lk any
	if ledgerKind != "" {
		lk = ledgerKind
	}
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM mp_ledger
		WHERE kind IS NOT DISTINCT FROM $1 AND outcome = 'ok' AND ended_at >= $2 AND ended_at < $3`, lk, from, to).Scan(&n); err != nil {
		t.Fatalf("ledger rate: %v", err)
	}
	return float64(n) / to.Sub(from).Seconds()
}
