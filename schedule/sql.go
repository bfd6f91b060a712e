package schedule

// The statements over jobpipe_schedules and jobpipe_schedule_firings (migration 00004). Graces travel
// as seconds (float8), so no client needs to map Go durations to intervals.
const (
	dbNowSQL = `SELECT now()`

	insertSQL = `INSERT INTO jobpipe_schedules (name, kind, spec, time_zone, catch_up, grace, data, next_run_at)
VALUES ($1, $2, $3, $4, $5, make_interval(secs => $6), $7, $8)
ON CONFLICT (name) DO NOTHING
RETURNING next_run_at`

	// idleTimeoutSQL bounds, in milliseconds ($1), how long the round's transaction may sit idle before
	// the server ends its session (SET LOCAL: the pooled connection keeps its own setting afterwards).
	idleTimeoutSQL = `SELECT set_config('idle_in_transaction_session_timeout', $1, true)`

	// lockSQL locks a schedule's row: every writer of a schedule's firings and next_run_at holds it,
	// so they take turns.
	lockSQL = `SELECT kind, spec, time_zone, catch_up, extract(epoch FROM grace)::float8, next_run_at, now()
FROM jobpipe_schedules WHERE name = $1 FOR UPDATE`

	// redefineSQL updates a definition that changed; it changes nothing (and returns no row) when
	// nothing did.
	redefineSQL = `UPDATE jobpipe_schedules SET kind = $2, spec = $3, time_zone = $4, catch_up = $5,
	grace = make_interval(secs => $6), data = $7, next_run_at = $8, updated_at = now()
WHERE name = $1 AND (kind, spec, time_zone, catch_up, grace, data, next_run_at)
	IS DISTINCT FROM ($2, $3, $4, $5, make_interval(secs => $6), $7::jsonb, $8)
RETURNING updated_at`

	columns = `name, kind, spec, time_zone, catch_up, extract(epoch FROM grace)::float8, data, next_run_at, last_run_at,
	last_job_id, created_at, updated_at`
	listSQL   = `SELECT ` + columns + ` FROM jobpipe_schedules ORDER BY name`
	getSQL    = `SELECT ` + columns + ` FROM jobpipe_schedules WHERE name = $1`
	deleteSQL = `DELETE FROM jobpipe_schedules WHERE name = $1`

	// firedSQL returns which of the instants $2 are fired already.
	firedSQL = `SELECT instant FROM jobpipe_schedule_firings WHERE name = $1 AND instant = ANY ($2::timestamptz[])`

	recordSQL = `INSERT INTO jobpipe_schedule_firings (name, instant, job_id)
SELECT $1, u.instant, u.job_id FROM unnest($2::timestamptz[], $3::bigint[]) AS u(instant, job_id)`

	// advanceSQL moves next_run_at on, and records the latest firing if the round made one ($3, $4
	// NULL otherwise).
	advanceSQL = `UPDATE jobpipe_schedules SET next_run_at = $2,
	last_run_at = coalesce($3, last_run_at), last_job_id = coalesce($4, last_job_id)
WHERE name = $1`

	// trimSQL keeps the firings table bounded: an instant a week old is far behind next_run_at, where
	// its row no longer guards anything.
	trimSQL = `DELETE FROM jobpipe_schedule_firings WHERE name = $1 AND instant < now() - interval '7 days'`
)
