package faultkit

// The checks that hold after every PostgreSQL fault: nothing lost or stuck, every re-run explained
// by the audit.

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/dispatcher"
)

// Outcome is what became of one kind's jobs.
type Outcome struct {
	Rows, Known, Lost, Failed int // rows in the table; ids the load knows; known ids missing or not processed; rows failed
	Duplicates                int // jobs whose handler ended ok more than once
	ByRescue, ByRetry         int // of the duplicates' extra ok calls: the lease was lost (rescued), or the attempt ended in a retry
}

// CheckOutcome checks, once everything has drained, that every job of the table is processed (none
// failed, none of the known ids missing: lost = 0), and explains every duplicate from the audit: a
// job whose handler ended ok more than once was processed by exactly one of those attempts
// (CheckAudit checks that the processed one held the token and had ended ok), and each other such
// attempt left the running state without processing the row, either taken back by the rescuer
// (token bumped: its lease was lost) or finished as a retry (its handler returned an error after its
// ledger row said ok). Either way the job ran at least once and was recorded once. ledgerKind is the
// table's kind in the ledger ("" for the keyed kind).
func (e *PostgresWorld) CheckOutcome(t *testing.T, table, ledgerKind string, known []int64) Outcome {
	t.Helper()
	ctx := context.Background()
	o := Outcome{Known: len(known)}
	if err := e.DB.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE failed_at IS NOT NULL),
		(SELECT count(*) FROM unnest($1::bigint[]) k(id) WHERE NOT EXISTS (SELECT 1 FROM `+table+` t WHERE t.id = k.id AND t.processed_at IS NOT NULL))
		FROM `+table, known).Scan(&o.Rows, &o.Failed, &o.Lost); err != nil {
		t.Fatal(err)
	}
	if o.Lost != 0 || o.Failed != 0 {
		t.Errorf("%s: %d of %d known jobs not processed, %d rows failed; want none", table, o.Lost, o.Known, o.Failed)
	}
	rows, err := e.DB.Query(ctx, `WITH ok AS (SELECT job_id, token FROM mp_ledger WHERE coalesce(kind, '') = $2 AND outcome = 'ok'),
		dup AS (SELECT job_id FROM ok GROUP BY job_id HAVING count(*) > 1)
		SELECT ok.job_id, ok.token, coalesce((SELECT string_agg(a.new_state || CASE WHEN a.new_token > a.old_token THEN ' rescued' ELSE '' END, ',')
			FROM fault_audit a WHERE a.kind = $1 AND a.job_id = ok.job_id AND a.old_token = ok.token
				AND a.old_state = 'running' AND a.new_state <> 'running'), 'never left running')
		FROM ok JOIN dup USING (job_id) ORDER BY ok.job_id, ok.token`, table, ledgerKind)
	if err != nil {
		t.Fatal(err)
	}
	type okCall struct {
		Job, Token int64
		Left       string // how the attempt left running, per the audit
	}
	calls, err := pgx.CollectRows(rows, pgx.RowToStructByPos[okCall])
	if err != nil {
		t.Fatal(err)
	}
	byJob := map[int64][]okCall{}
	for _, c := range calls {
		byJob[c.Job] = append(byJob[c.Job], c)
	}
	report := NewFailureLog(t, table+": duplicates explained")
	defer report.Done()
	for job, cs := range byJob {
		o.Duplicates++
		processed := 0
		for _, c := range cs {
			switch c.Left {
			case "processed":
				processed++
			case "waiting rescued", "failed rescued":
				o.ByRescue++
			case "waiting":
				o.ByRetry++
			default:
				report.Errorf("%s: job %d ran ok more than once, and its attempt with token %d left running as %q: not explained", table, job, c.Token, c.Left)
			}
		}
		if processed != 1 {
			report.Errorf("%s: job %d ran ok %d times (%v), %d of them processed the row; want exactly 1", table, job, len(cs), cs, processed)
		}
	}
	return o
}

// Verdict is what the end of a scenario found.
type Verdict struct {
	Plain, Keyed           Outcome
	auditPlain, auditKeyed AuditSummary
	stats                  dispatcher.Stats
	enqueueFailures        int
	drained                time.Duration // from the load's end until every job was finished
}

// Figures are the figures every PostgreSQL scenario reports, as ReportFigures pairs.
func (v Verdict) Figures() []any {
	return []any{
		"jobs", v.Plain.Rows + v.Keyed.Rows, "lost", v.Plain.Lost + v.Keyed.Lost,
		"duplicates", v.Plain.Duplicates + v.Keyed.Duplicates,
		"dup by rescue", v.Plain.ByRescue + v.Keyed.ByRescue, "dup by retry", v.Plain.ByRetry + v.Keyed.ByRetry,
		"rescued", v.stats.Rescued, "retried", v.stats.Retried, "stale finishes", v.stats.StaleFinishes,
		"leases lost", v.stats.LeasesLost, "enqueue calls failed", v.enqueueFailures,
		// rows an enqueue reported as failed although it committed
		"rows enqueued unknown", v.Plain.Rows + v.Keyed.Rows - v.Plain.Known - v.Keyed.Known,
		"drained in", v.drained, "audited finishes", v.auditPlain.Completions + v.auditKeyed.Completions,
	}
}

// End ends a scenario: it stops the load, waits until every job has finished, logs the
// completions per second since from, and verifies what happened (see verify).
func (e *PostgresWorld) End(t *testing.T, load *OfferedLoad, from time.Time) Verdict {
	t.Helper()
	plainIDs, keyedIDs, failures := load.Stop()
	stopped := time.Now()
	drained := e.Drain(t, 3*postgresLeaseTTL)
	e.LogTimeline(t, "plain", PostgresPlainKind, from, stopped.Add(drained))
	e.LogTimeline(t, "keyed", "", from, stopped.Add(drained))
	e.CheckAlive(t, "once the load had drained")
	v := e.verify(t, plainIDs, keyedIDs)
	v.enqueueFailures, v.drained = failures, drained
	return v
}

// verify checks what a scenario leaves once its load has drained: SIGTERM to every worker (each
// exits 0 within 10 s), nothing left leased or locked, then the audit of both kinds, their outcomes
// (lost = 0, duplicates explained) and the per-key counts (never two handlers of a key, or of a
// plain job, at once).
func (e *PostgresWorld) verify(t *testing.T, plainIDs, keyedIDs []int64) Verdict {
	t.Helper()
	var v Verdict
	Terminate(t, e.Workers...)
	e.CheckQuiet(t)
	e.CheckQuietPlain(t)
	e.BringLedgerHome(t)
	// The audit's checks join tens of thousands of rows by job and token, and match the ledger's kind
	// with IS NOT DISTINCT FROM, which no hash join can do: without these indexes (the ledger's is
	// CheckAudit's own) and fresh statistics, the planner's nested loops take minutes.
	for _, stmt := range []string{`CREATE INDEX IF NOT EXISTS mp_ledger_job_token ON mp_ledger (job_id, token)`,
		`CREATE INDEX ON fault_audit (job_id)`,
		`ANALYZE fault_audit, mp_ledger, mp_conc`} {
		if _, err := e.DB.Exec(context.Background(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	v.auditPlain = CheckAudit(t, e.DB, PostgresPlainKind, PostgresPlainKind)
	v.auditKeyed = CheckAudit(t, e.DB, KeyedKind, "")
	v.Plain = e.CheckOutcome(t, PostgresPlainKind, PostgresPlainKind, plainIDs)
	v.Keyed = e.CheckOutcome(t, KeyedKind, "", keyedIDs)
	e.CheckConc(t, nil, 1)
	v.stats = e.WorkerStats(t)
	return v
}
