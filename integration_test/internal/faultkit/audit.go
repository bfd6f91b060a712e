package faultkit

// The audit of every change a kind's rows go through, from which the checks that hold in every
// scenario are made (tokens never go backwards, a job finishes at most once, and only the attempt
// holding a row's token finishes it), and the throughput the ledger shows.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// auditDDL records every change of a kind's rows as the database saw it: the row's token and
// state before and after, and when (the database's clock, as in the ledger). A row's state is
// processed, failed, running (leased) or waiting.
const auditDDL = `CREATE TABLE fault_audit (
	n bigserial PRIMARY KEY,
	kind text NOT NULL,
	job_id bigint NOT NULL,
	at timestamptz NOT NULL DEFAULT clock_timestamp(),
	old_token bigint NOT NULL,
	new_token bigint NOT NULL,
	old_state text NOT NULL,
	new_state text NOT NULL,
	old_owner text,
	new_owner text,
	old_attempts int,
	new_attempts int)`

// InstallAudit makes every update of table (a kind's table in the schema of db) write a row to
// fault_audit, creating it on first use. The trigger's function is created in schema, so that the
// workers' updates, whatever their search_path, are recorded.
func InstallAudit(t *testing.T, db *pgxpool.Pool, schema, table string) {
	t.Helper()
	ctx := context.Background()
	s, tbl := pgx.Identifier{schema}.Sanitize(), pgx.Identifier{schema, table}.Sanitize()
	state := func(r string) string {
		return fmt.Sprintf(`CASE WHEN %[1]s.processed_at IS NOT NULL THEN 'processed' WHEN %[1]s.failed_at IS NOT NULL THEN 'failed'
			WHEN %[1]s.lease_expires_at IS NOT NULL THEN 'running' ELSE 'waiting' END`, r)
	}
	stmts := []string{
		strings.Replace(auditDDL, "CREATE TABLE fault_audit", "CREATE TABLE IF NOT EXISTS "+s+".fault_audit", 1),
		fmt.Sprintf(`CREATE OR REPLACE FUNCTION %[1]s.fault_audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO %[1]s.fault_audit (kind, job_id, old_token, new_token, old_state, new_state, old_owner, new_owner, old_attempts, new_attempts)
	VALUES (TG_TABLE_NAME, NEW.id, OLD.lock_token, NEW.lock_token, %[2]s, %[3]s, OLD.lease_owner, NEW.lease_owner, OLD.attempts_made, NEW.attempts_made);
	RETURN NULL;
END $$`, s, state("OLD"), state("NEW")),
		fmt.Sprintf(`CREATE TRIGGER fault_audit AFTER UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION %s.fault_audit_row()`, tbl, s),
	}
	for _, stmt := range stmts {
		if _, err := db.Exec(ctx, stmt); err != nil {
			t.Fatalf("installing the audit of %s: %v", table, err)
		}
	}
}

// AuditSummary is what CheckAudit found.
type AuditSummary struct {
	Changes     int // audited changes of the kind's rows
	Completions int // changes into processed or failed
	Rescues     int // running rows taken back after their lease expired (token bumped, back to waiting or failed)
}

// CheckAudit checks the audit of kind (its table's name) against the ledger, whose rows of the kind
// have ledger kind ledgerKind ("" for NULL: the keyed kind of the worker processes):
//   - a row's token never goes backwards;
//   - a row becomes processed or failed at most once;
//   - a running row leaves running either by a rescue (which takes a new token) or by a finish
//     written for the attempt that holds its token: a ledger row of that job with that token exists,
//     and when the row became processed, that attempt's handler had ended with "ok" before. A
//     worker whose lease was lost cannot finish a row (the fence, I1): without the fence, its stale
//     write would complete the row while the attempt now holding it still runs. A claim given back
//     unrun (its execution lock was still held elsewhere: Stats.Released) has no handler call; its
//     release takes back the attempt it counted, which tells it apart;
//   - likewise, a running row is never sent back to wait or failed while the attempt holding its
//     token still runs (that attempt's handler ended only after the change): a paused worker's stale
//     write is a retry (its lost lease cancels its job), which the fence alone refuses.
func CheckAudit(t *testing.T, db *pgxpool.Pool, kind, ledgerKind string) AuditSummary {
	t.Helper()
	ctx := context.Background()
	var lk any
	if ledgerKind != "" {
		lk = ledgerKind
	}
	// The checks look the ledger up by job and token for every audited change: without an index,
	// each is a scan of the ledger, and a run of a few thousand jobs takes tens of seconds to check.
	if _, err := db.Exec(ctx, `CREATE INDEX IF NOT EXISTS mp_ledger_job_token ON mp_ledger (job_id, token)`); err != nil {
		t.Fatalf("indexing the ledger: %v", err)
	}
	var c AuditSummary
	if err := db.QueryRow(ctx, `SELECT count(*),
		count(*) FILTER (WHERE old_state NOT IN ('processed', 'failed') AND new_state IN ('processed', 'failed')),
		count(*) FILTER (WHERE old_state = 'running' AND new_state <> 'running' AND new_token > old_token)
		FROM fault_audit WHERE kind = $1`, kind).Scan(&c.Changes, &c.Completions, &c.Rescues); err != nil {
		t.Fatalf("reading the audit of %s: %v", kind, err)
	}
	problems := []struct{ what, sql string }{
		{"token went backwards", `SELECT job_id, old_token, new_token, old_state, new_state, at FROM fault_audit
			WHERE kind = $1 AND new_token < old_token ORDER BY n LIMIT 10`},
		{"finished more than once", `SELECT job_id, count(*), min(at), max(at) FROM fault_audit
			WHERE kind = $1 AND old_state NOT IN ('processed', 'failed') AND new_state IN ('processed', 'failed')
			GROUP BY job_id HAVING count(*) > 1 ORDER BY job_id LIMIT 10`},
		{"finished by no attempt holding its token", `SELECT a.job_id, a.old_token, a.new_state, a.at, a.old_owner FROM fault_audit a
			WHERE a.kind = $1 AND a.old_state = 'running' AND a.new_state <> 'running' AND a.new_token = a.old_token
			AND NOT (a.new_state = 'waiting' AND a.new_attempts = a.old_attempts - 1)
			AND NOT EXISTS (SELECT 1 FROM mp_ledger l WHERE l.job_id = a.job_id AND l.token = a.old_token AND l.kind IS NOT DISTINCT FROM $2)
			ORDER BY a.n LIMIT 10`},
		{"processed before the attempt holding its token ended well", `SELECT a.job_id, a.old_token, a.at, l.ended_at, l.outcome
			FROM fault_audit a LEFT JOIN mp_ledger l ON l.job_id = a.job_id AND l.token = a.old_token AND l.kind IS NOT DISTINCT FROM $2
			WHERE a.kind = $1 AND a.old_state = 'running' AND a.new_state = 'processed'
			AND (l.n IS NULL OR l.ended_at IS NULL OR l.ended_at > a.at OR l.outcome IS DISTINCT FROM 'ok')
			ORDER BY a.n LIMIT 10`},
		{"left running while the attempt holding its token still ran", `SELECT a.job_id, a.old_token, a.new_state, a.at, l.ended_at, l.node
			FROM fault_audit a JOIN mp_ledger l ON l.job_id = a.job_id AND l.token = a.old_token AND l.kind IS NOT DISTINCT FROM $2
			WHERE a.kind = $1 AND a.old_state = 'running' AND a.new_state NOT IN ('running', 'processed') AND a.new_token = a.old_token
			AND l.ended_at > a.at
			ORDER BY a.n LIMIT 10`},
	}
	for _, p := range problems {
		args := []any{kind}
		if strings.Contains(p.sql, "$2") {
			args = append(args, lk)
		}
		rows, err := db.Query(ctx, p.sql, args...)
		if err != nil {
			t.Fatalf("checking the audit of %s (%s): %v", kind, p.what, err)
		}
		found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			v, err := r.Values()
			return fmt.Sprint(v), err
		})
		if err != nil {
			t.Fatalf("checking the audit of %s (%s): %v", kind, p.what, err)
		}
		for _, f := range found {
			t.Errorf("%s: %s: %s", kind, p.what, f)
		}
	}
	return c
}
