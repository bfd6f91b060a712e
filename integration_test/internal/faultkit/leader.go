package faultkit

// The maintenance leases and schedule firings, logged as they change, and a worker stopped inside
// a schedule round.

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// leaderLogSQL logs, for the leader scenario, every change of a maintenance lease's holder
// (jobpipe_leaders: rescue:KIND, prune:KIND, schedule:NAME) and every schedule firing with the session
// that fired it; and lets the test stop a chosen session inside a schedule round: the first job that
// session enqueues for the tick kind (TICK) after a row for it appears in wf_hold waits, in its
// round's transaction, for the advisory lock the row names.
const leaderLogSQL = `CREATE TABLE {schema}.wf_leaders (
	n bigserial PRIMARY KEY, name text NOT NULL, holder text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION {schema}.wf_log_leader() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' OR OLD.holder IS DISTINCT FROM NEW.holder THEN
		INSERT INTO {schema}.wf_leaders (name, holder) VALUES (NEW.name, NEW.holder);
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER wf_log_leader AFTER INSERT OR UPDATE ON {schema}.jobpipe_leaders FOR EACH ROW EXECUTE FUNCTION {schema}.wf_log_leader();

CREATE TABLE {schema}.wf_firings (
	instant timestamptz NOT NULL, job_id bigint NOT NULL, app text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION {schema}.wf_log_firing() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO {schema}.wf_firings (instant, job_id, app) VALUES (NEW.instant, NEW.job_id, current_setting('application_name'));
	RETURN NULL;
END $$;
CREATE TRIGGER wf_log_firing AFTER INSERT ON {schema}.jobpipe_schedule_firings FOR EACH ROW EXECUTE FUNCTION {schema}.wf_log_firing();

CREATE TABLE {schema}.wf_hold (app text PRIMARY KEY, lock bigint NOT NULL);
CREATE FUNCTION {schema}.wf_hold_round() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	k bigint;
BEGIN
	DELETE FROM {schema}.wf_hold WHERE app = current_setting('application_name') RETURNING lock INTO k;
	IF k IS NOT NULL THEN
		PERFORM pg_advisory_xact_lock_shared(k);
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER wf_hold_round BEFORE INSERT ON {tick} FOR EACH ROW EXECUTE FUNCTION {schema}.wf_hold_round()`

// InstallLeaderLog installs leaderLogSQL in e's schema, for the tick kind tick.
func InstallLeaderLog(t *testing.T, e *World, tick string) {
	t.Helper()
	sql := strings.NewReplacer("{schema}", pgx.Identifier{e.Schema.Name}.Sanitize(),
		"{tick}", pgx.Identifier{e.Schema.Name, tick}.Sanitize()).Replace(leaderLogSQL)
	if _, err := e.DB.Exec(context.Background(), sql); err != nil {
		t.Fatalf("installing the leader log: %v", err)
	}
}

// StopInScheduleRound stops w (SIGSTOP) inside a round of the tick schedule, which it must lead: its round
// has enqueued the instant's job and holds the schedule's row when the process stops, and the server
// then waits for the round's next statement. It returns when w stopped (the database's clock) and
// how to resume it.
func StopInScheduleRound(t *testing.T, e *World, w *Worker, app string) (stoppedAt time.Time, resume func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := e.DB.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	key := rand.Int64()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
				t.Errorf("advisory unlock: %v", err)
			}
		}
	}
	defer unlock()
	if _, err := e.DB.Exec(ctx, `INSERT INTO wf_hold (app, lock) VALUES ($1, $2)`, app, key); err != nil {
		t.Fatal(err)
	}
	WaitFor(t, w.Name+"'s next schedule round to enqueue its job", 30*time.Second, func() bool {
		return QueryCount(t, e.DB, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1
			AND wait_event_type = 'Lock' AND wait_event = 'advisory'`, app) == 1
	})
	resume = Pause(t, w)
	stoppedAt = e.Now(t)
	unlock() // the job is enqueued: the round waits on its stopped client
	return stoppedAt, resume
}

// LeaseHolders returns each maintenance lease's holder now.
func LeaseHolders(t *testing.T, db *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT name, holder FROM jobpipe_leaders WHERE expires_at > now()`)
	if err != nil {
		t.Fatal(err)
	}
	leases := map[string]string{}
	var name, holder string
	if _, err := pgx.ForEachRow(rows, []any{&name, &holder}, func() error { leases[name] = holder; return nil }); err != nil {
		t.Fatal(err)
	}
	return leases
}
