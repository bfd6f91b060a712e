package kindsql

// finishSQL records a batch of outcomes, fenced by each row's token, and enqueues the next runs asked
// for by RunAgain in the same statement. Rows whose token no longer matches (the lease was lost and
// the job taken back) are left alone and not returned.
const finishSQL = `WITH u AS (
	SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int2[], $4::text[], $5::float8[]) AS u(id, token, outcome, err, delay)),
done AS (
	UPDATE {{.Table}} t SET {{template "finishSet" .}}
	FROM u WHERE t.id = u.id AND t.lock_token = u.token AND {{stillRunning "t"}}
	RETURNING t.id, u.outcome, u.delay),
again AS (
	{{template "again" .}})
SELECT id, (SELECT pg_notify({{.Channel}}, {{.Name}}) WHERE $6) IS NULL FROM done`

// finishSet is how each outcome changes its row: the one place of the outcomes' effects, which both
// finish statements share.
//
// A released claim of a job's first attempt (it never ran) makes the job "never started" again, so
// that it keeps blocking duplicates until executed, when no other never-started job of its unique key
// arrived while it was claimed. If one did, the released job stays marked as started and the newer job
// carries the key.
const finishSet = `lease_expires_at = NULL, lease_owner = NULL, lock_slot = NULL, updated_at = now(),
		processed_at = CASE WHEN u.outcome IN ({{.Out.Processed}}, {{.Out.RunAgain}}) THEN now() END,
		failed_at = CASE WHEN u.outcome = {{.Out.Failed}} THEN now() END,
		last_error = CASE WHEN u.outcome IN ({{.Out.Retry}}, {{.Out.Failed}}) THEN u.err ELSE t.last_error END,
		process_after = CASE WHEN u.outcome IN ({{.Out.Retry}}, {{.Out.Snooze}}, {{.Out.Release}}) THEN now() + make_interval(secs => u.delay) ELSE t.process_after END,
		attempts_made = CASE WHEN u.outcome IN ({{.Out.Snooze}}, {{.Out.Release}}) THEN t.attempts_made - 1 ELSE t.attempts_made END,
		started_at = CASE WHEN u.outcome = {{.Out.Release}} AND t.attempts_made = 1
		{{- if .Unique}} AND NOT EXISTS (SELECT 1 FROM {{.Table}} x WHERE {{.SameUnique "x" "t"}} AND x.id <> t.id AND {{neverRan "x"}})
		{{- end}} THEN NULL ELSE t.started_at END`

// again enqueues the next run of each job finished with RunAgain (the CTE done), as a copy of its data
// due after its delay; for a unique kind, not when a never-started job of its unique key waits.
const again = `INSERT INTO {{.Table}} ({{.Columns ""}}, process_after)
	SELECT {{.Columns "s"}}, now() + make_interval(secs => d.delay) FROM {{.Table}} s JOIN done d ON s.id = d.id WHERE d.outcome = {{.Out.RunAgain}}
	{{- if .Unique}}
	ON CONFLICT ({{.UniqueCols}}) WHERE {{neverRan ""}} DO NOTHING
	{{- end}}`

// finishRunSQL is a keyed kind's finish statement (see finishSQL). It also continues key runs: for
// each finished job with a slot in $7 (-1: the run ends) whose outcome leaves nothing of its key
// behind it (processed or failed), it claims the key's next due waiting job on the same slot, as any
// claim does (attempt counted, token bumped, its own lease: $10 seconds, owner $11).
//
//   - The job is its key's first waiting job in the kind's order (the k-th for the k-th run of a key
//     finishing in the batch).
//   - The limits are read afresh from jobpipe_kind_limits and jobpipe_key_limits for kind $9 ($8 is
//     the kind's configured per-key default), so a change ends runs at their next job even when no
//     claim pass reads them: the kind must not be paused or run its total, and the key's running
//     jobs, this run's included, must all hold slots below the key's limit. Slots are taken below the
//     limit and are distinct, so then the key runs no more than its limit; after the limit was
//     lowered, the key's runs end until its jobs on the slots above it have finished. The check
//     reads only the slots above the limit in the running-slots index, where a key whose limit never
//     changed has no entry, instead of counting the key's running jobs; written as a scalar
//     subquery, since as NOT EXISTS it was planned as an anti-join that read the whole index for
//     each run.
//   - Each next row takes its predecessor's slot only after the predecessor's update gave it up (nxt
//     reads done), which the running-slots index checks as usual.
//   - The claims are one row of arrays, so that their update looks its rows up by id whatever the
//     planner estimates: joined to a row per claim, estimated at one, it became a nested loop that
//     read every claimed row again for each claim.
//   - The key's jobs up to the next one are locked SKIP LOCKED, and the run ends when one of them is
//     locked elsewhere (a claim pass choosing it, another finish claiming it): the statement never
//     waits for another transaction's row locks, which could wait for its own, and a job never starts
//     ahead of an earlier one of its key that another transaction may still claim.
//
// It returns a row per job claimed, or one row if none was: the ids of the finished jobs whose fence
// held (an array, in the first row only), the notification's column, then the id of the finished job
// the claim follows and the claim's columns (NULL when none). A key whose run ended, or a job that
// goes back to wait, notifies the kind's channel.
const finishRunSQL = `WITH u AS (
	SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int2[], $4::text[], $5::float8[], $7::int[]) AS u(id, token, outcome, err, delay, slot)),
done AS (
	UPDATE {{.Table}} t SET {{template "finishSet" .}}
	FROM u WHERE t.id = u.id AND t.lock_token = u.token AND {{stillRunning "t"}}
	RETURNING t.id, u.outcome, u.delay, u.slot, {{.KeyCols "t"}}),
again AS (
	{{template "again" .}}),
runs AS (
	SELECT d.id AS prev, d.slot, {{.KeyCols ""}}, row_number() OVER (PARTITION BY {{.KeyCols ""}} ORDER BY d.id) AS rn
	FROM done d WHERE d.slot >= 0 AND d.outcome IN ({{.Out.Processed}}, {{.Out.Failed}})),
kl AS MATERIALIZED (
	SELECT coalesce(l.key_limit, $8) AS key_limit, l.max_running, coalesce(l.paused, false) AS paused
	FROM (SELECT) one LEFT JOIN jobpipe_kind_limits l ON l.kind = $9),
nxt AS (
	SELECT r.prev, r.slot, r.rn, w.ids FROM runs r CROSS JOIN kl CROSS JOIN LATERAL (
		SELECT coalesce((SELECT CASE WHEN l.paused THEN 0 ELSE coalesce(l.key_limit, kl.key_limit) END
			FROM jobpipe_key_limits l WHERE l.kind = $9 AND l.key_value = {{.KeyText "r"}}), kl.key_limit) AS lim) x
	CROSS JOIN LATERAL (
		SELECT array_agg(e.id ORDER BY {{.Order "e"}}) AS ids, bool_and(e.due) AS due, count(*) AS n FROM (
			SELECT e.id, e.created_at, e.process_after, {{.Due "e"}} AS due FROM {{.Table}} e
			WHERE {{.InKey "e" "r"}} AND {{waiting "e"}} ORDER BY {{.KeyOrder "e"}} LIMIT r.rn) e) w
	WHERE NOT kl.paused AND w.n = r.rn AND w.due
		AND r.slot < x.lim AND (SELECT e.id FROM {{.Table}} e WHERE {{.SameKey "e" "r"}} AND {{running "e"}} AND e.lock_slot >= x.lim LIMIT 1) IS NULL
		AND (kl.max_running IS NULL OR (SELECT count(*) FROM {{.Table}} e WHERE {{leased "e"}}) < kl.max_running)),
free AS (
	SELECT t.id FROM {{.Table}} t WHERE t.id = ANY (ARRAY(SELECT unnest(ids) FROM nxt)) FOR UPDATE SKIP LOCKED),
claimable AS (
	SELECT array_agg(n.ids[n.rn]) AS ids, array_agg(n.prev) AS prevs, array_agg(n.slot) AS slots
	FROM nxt n WHERE n.ids <@ ARRAY(SELECT id FROM free)),
claimed AS (
	UPDATE {{.Table}} t SET {{.ClaimSet "$10" "$11"}},
		lock_slot = c.slots[array_position(c.ids, t.id)] FROM claimable c
	WHERE t.id = ANY (c.ids) AND {{waiting "t"}}
	RETURNING c.prevs[array_position(c.ids, t.id)] AS prev, {{.Returning}})
SELECT CASE WHEN c.prev IS NULL OR c.prev = (SELECT min(prev) FROM claimed) THEN (SELECT array_agg(id) FROM done) END,
	(SELECT pg_notify({{.Channel}}, {{.Name}}) WHERE $6 OR (SELECT count(*) FROM runs) > (SELECT count(*) FROM claimed)) IS NULL, c.*
FROM (SELECT) one LEFT JOIN claimed c ON true`

var _ = parse(statements, map[string]string{
	"finishSQL": finishSQL, "finishSet": finishSet, "again": again, "finishRunSQL": finishRunSQL,
})
