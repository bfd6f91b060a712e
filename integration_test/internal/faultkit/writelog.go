package faultkit

// A log of every UPDATE statement sent to a kind's table: who sent it, what it was, and how many rows
// it changed, also none.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// writeLogSQL logs every UPDATE statement of a table, also those that change no row: when, which
// session sent it (application_name), what it was (from its text: a claim, a heartbeat's lease
// extension, a finish, a rescue) and how many rows it changed. The function is created in the test's
// schema, as InstallAudit's is.
const writeLogSQL = `CREATE TABLE IF NOT EXISTS {schema}.wf_writes (
	n bigserial PRIMARY KEY,
	tbl text NOT NULL,
	app text NOT NULL,
	stmt text NOT NULL,
	rows int NOT NULL,
	at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE OR REPLACE FUNCTION {schema}.wf_log_writes() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	q text := current_query();
BEGIN
	INSERT INTO {schema}.wf_writes (tbl, app, stmt, rows) SELECT TG_TABLE_NAME, current_setting('application_name'),
		CASE WHEN q LIKE '%AS u(id, token, outcome, err, delay%' THEN 'finish'
			WHEN q LIKE '%WITH expired AS%' THEN 'rescue'
			WHEN q LIKE '%attempts_made = t.attempts_made + 1%' THEN 'claim'
			WHEN q LIKE '%SET lease_expires_at = now() + make_interval(secs => $3)%WHERE t.id = $1 AND t.lock_token = $2%' THEN 'heartbeat'
			ELSE 'other' END,
		(SELECT count(*) FROM changed);
	RETURN NULL;
END $$;
CREATE TRIGGER wf_log_writes AFTER UPDATE ON {table} REFERENCING NEW TABLE AS changed
	FOR EACH STATEMENT EXECUTE FUNCTION {schema}.wf_log_writes()`

// InstallWriteLog logs every UPDATE statement of table (see writeLogSQL).
func InstallWriteLog(t *testing.T, db *pgxpool.Pool, schema, table string) {
	t.Helper()
	sql := strings.NewReplacer("{schema}", pgx.Identifier{schema}.Sanitize(), "{table}", pgx.Identifier{schema, table}.Sanitize()).Replace(writeLogSQL)
	if _, err := db.Exec(context.Background(), sql); err != nil {
		t.Fatalf("installing the write log of %s: %v", table, err)
	}
}

// Write is one logged UPDATE statement.
type Write struct {
	Stmt string
	Rows int
	At   time.Time
}

// Writes returns the statements app sent to table at or after from, of the kinds stmts (all if
// none given), in order.
func Writes(t *testing.T, db *pgxpool.Pool, table, app string, from time.Time, stmts ...string) []Write {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT stmt, rows, at FROM wf_writes
		WHERE tbl = $1 AND app = $2 AND at >= $3 AND (cardinality($4::text[]) = 0 OR stmt = ANY ($4)) ORDER BY n`, table, app, from, stmts)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Write])
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// RowsChanged sums the rows the writes changed.
func RowsChanged(ws []Write) int {
	n := 0
	for _, w := range ws {
		n += w.Rows
	}
	return n
}
