package faultkit

// Reading the ledger of handler calls, and counting and waiting on the kinds' tables.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
)

// Calls reads the ledger's calls of ledgerKind ("" for the keyed kind) of job id, in start order.
func Calls(t *testing.T, db *pgxpool.Pool, ledgerKind string, id int64) []Call {
	t.Helper()
	var lk any
	if ledgerKind != "" {
		lk = ledgerKind
	}
	rows, err := db.Query(context.Background(), `SELECT n, job_id, blog_id, seq, attempt, token, slot, pid, node,
		started_at, ended_at, outcome, coalesce(running, 0) FROM mp_ledger
		WHERE kind IS NOT DISTINCT FROM $1 AND job_id = $2 ORDER BY started_at, n`, lk, id)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Call])
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

// CallCount counts the ledger's calls of ledgerKind of job id.
func CallCount(t *testing.T, db *pgxpool.Pool, ledgerKind string, id int64) int {
	t.Helper()
	return QueryCount(t, db, `SELECT count(*) FROM mp_ledger WHERE kind IS NOT DISTINCT FROM $1 AND job_id = $2`, ledgerKindArg(ledgerKind), id)
}

// ledgerKindArg is ledgerKind as the ledger's kind column holds it.
func ledgerKindArg(ledgerKind string) any {
	if ledgerKind == "" {
		return nil
	}
	return ledgerKind
}

// QueryCount runs a count query.
func QueryCount(t *testing.T, db *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// WaitFinished waits until every job of ids in table is processed or failed.
func WaitFinished(t *testing.T, db *pgxpool.Pool, table string, ids []int64, within time.Duration) {
	t.Helper()
	WaitFor(t, fmt.Sprintf("the %d jobs of %s to finish", len(ids), table), within, func() bool {
		return QueryCount(t, db, `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()+`
			WHERE id = ANY ($1) AND (processed_at IS NOT NULL OR failed_at IS NOT NULL)`, ids) == len(ids)
	})
}

// LeaseLost tells whether a call ended because its lease was lost.
func LeaseLost(m Call) bool {
	return m.Outcome != nil && strings.HasPrefix(*m.Outcome, dispatcher.ErrLeaseLost.Error())
}
