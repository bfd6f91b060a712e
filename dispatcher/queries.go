package dispatcher

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/states"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/uniqueness"
)

// kindSQL holds a kind's statements, built once at registration from sanitised identifiers.
type kindSQL struct {
	// claimPlain claims up to $1 due jobs of a kind without a key. $2 lease seconds, $3 owner, $4 the
	// lowest id to look at (see kindRunner.plainClaimFrom).
	//
	// Its update finds the locked rows by id in an array, bounded by $4 too, for the plan's sake: pgx
	// prepares the statement once per connection, and PostgreSQL keeps its generic plan, made with
	// the table's size at that moment, until the table is next analyzed. A join of the locked rows to
	// the table may then be planned as a hash join over a sequential scan, and the id array alone,
	// planned over a kind's first few jobs, as a sequential scan. With both conditions every plan reads
	// the primary key (TestClaimPlanNeverReadsTheTable).
	claimPlain string
	// countRunning counts the kind's running jobs.
	countRunning string
	// countDue counts the kind's waiting jobs that are due.
	countDue string
	// busySlots returns, for each job $1 of a keyed kind, the slots its key's running jobs hold.
	busySlots string
	// claimIDs claims the rows $1 with slots $2. $3 lease seconds, $4 owner, $5 the first waiting
	// job of each row's key when the heads were chosen.
	claimIDs string
	// finish records outcomes: $1 ids, $2 tokens, $3 outcomes, $4 errors, $5 delays in seconds; $6
	// whether to notify the kind's channel (see finishNotifies). A keyed kind's also continues key
	// runs (see finishRunSQL).
	finish string
	// extend renews the lease of $1 (token $2) by $3 seconds; returns a row when the fence held.
	extend string
	// nextDueAndNow is the earliest future process_after of a waiting job, and the database's now().
	nextDueAndNow string
	// rescue takes back up to 1000 expired leases; $1 max attempts, $2 retry delays by attempt. It
	// takes none until the server has been up for $3 seconds (Config.rescueQuiet): leases that ran
	// out while it was down are their workers' to renew first (see reach.go).
	rescue string
}

// returning lists what a claim reads back, in the order scanClaimed expects: the pipeline columns,
// then the key text and the claim's time (started_at, for the schedule lag metrics observe), then the
// data columns.
func returning(info *jobinfo.Info) string {
	key := "''"
	if len(info.Key) > 0 {
		key = info.KeyText("t")
	}
	cols := []string{"t.id", "t.attempts_made", "t.lock_token", "t.created_at", "t.process_after", "coalesce(t.lock_slot, -1)", key,
		"t.started_at"}
	for _, c := range info.Columns() {
		cols = append(cols, "t."+pgx.Identifier{c}.Sanitize())
	}
	return strings.Join(cols, ", ")
}

// pipelineColumns is how many columns returning puts before the data columns.
const pipelineColumns = 8

func buildSQL(info *jobinfo.Info) kindSQL {
	table := info.Table.Sanitize()
	order, due := "t.id", "(t.process_after IS NULL OR t.process_after <= now())"
	if info.Order == jobinfo.OrderProcessAfter {
		order, due = "COALESCE(t.process_after, t.created_at), t.id", "COALESCE(t.process_after, t.created_at) <= now()"
	}
	claimSet := `attempts_made = t.attempts_made + 1, started_at = now(), lease_expires_at = now() + make_interval(secs => %s),
		lease_owner = %s, lock_token = t.lock_token + 1, updated_at = now()`
	q := kindSQL{
		claimPlain: fmt.Sprintf(`WITH next AS (
	SELECT t.id FROM %[1]s t WHERE %[2]s AND %[3]s AND t.id >= $4 ORDER BY %[4]s LIMIT $1 FOR UPDATE SKIP LOCKED)
UPDATE %[1]s t SET %[5]s
WHERE t.id = ANY (ARRAY(SELECT id FROM next)) AND t.id >= $4
RETURNING %[6]s`, table, states.Waiting("t"), due, order, fmt.Sprintf(claimSet, "$2", "$3"), returning(info)),
		claimIDs: claimIDsSQL(info, table, fmt.Sprintf(claimSet, "$3", "$4"), order),
		extend: fmt.Sprintf(`UPDATE %s t SET lease_expires_at = now() + make_interval(secs => $3)
WHERE t.id = $1 AND t.lock_token = $2 AND %s RETURNING t.id`, table, states.StillRunning("t")),
		countRunning: fmt.Sprintf(`SELECT count(*) FROM %s t WHERE %s`, table, states.Running("t")),
		countDue:     fmt.Sprintf(`SELECT count(*) FROM %s t WHERE %s AND %s`, table, states.Waiting("t"), due),
		nextDueAndNow: fmt.Sprintf(`SELECT (SELECT min(t.process_after) FROM %s t WHERE t.process_after > now() AND %s), now()`,
			table, states.Waiting("t")),
		finish: finishSQL(info, table),
		rescue: fmt.Sprintf(`WITH expired AS (
	SELECT t.id FROM %[1]s t WHERE t.lease_expires_at < now() AND %[2]s
		AND pg_postmaster_start_time() < now() - make_interval(secs => $3)
	ORDER BY t.lease_expires_at LIMIT 1000 FOR UPDATE SKIP LOCKED)
UPDATE %[1]s t SET lease_expires_at = NULL, lease_owner = NULL, lock_slot = NULL, lock_token = t.lock_token + 1,
	updated_at = now(),
	last_error = 'lease expired: ' || coalesce(t.lease_owner, 'a dispatcher') || ' stopped renewing it (worker died or stalled)',
	failed_at = CASE WHEN t.attempts_made >= $1 THEN now() END,
	process_after = CASE WHEN t.attempts_made >= $1 THEN t.process_after
		ELSE now() + make_interval(secs => ($2::float8[])[least(t.attempts_made, $1)]) END
FROM expired WHERE t.id = expired.id
RETURNING t.id, t.failed_at IS NOT NULL`, table, states.NotFinished("t")),
	}
	if len(info.Key) > 0 {
		q.busySlots = fmt.Sprintf(`SELECT t.id, coalesce((SELECT array_agg(e.lock_slot) FROM %[1]s e WHERE %[2]s AND %[3]s), '{}')
FROM %[1]s t WHERE t.id = ANY ($1)`, table, sameKey(info, "e", "t"), states.Running("e"))
	}
	return q
}

// claimIDsSQL claims the rows $1 of a keyed kind, in the kind's order, with slots $2. Its snapshot is
// fresh, and it leaves a row waiting, with the later rows of its key, when
//   - a running job of its key holds its slot (a claim committed elsewhere after this dispatcher read
//     the slots, whose queue lock was already given back), rather than be refused by the
//     running-slots index; or
//   - an earlier job of its key waits and is not claimed with it: the heads query skipped that job
//     while another dispatcher held it, and that dispatcher gave it back. Started now, the row would
//     overtake it (I5). Such a job was waiting when the heads were chosen, so it lies at or after
//     the key's first waiting job then ($5, per row): the probe starts there, not at the dead index
//     entries of the key's finished jobs.
//
// Only a claim committing while the statement runs can still make it fail (23505).
func claimIDsSQL(info *jobinfo.Info, table, set, order string) string {
	keyCols := make([]string, len(info.Key))
	for i, k := range info.Key {
		keyCols[i] = "t." + pgx.Identifier{k}.Sanitize()
	}
	eWaiting := states.Waiting("e")
	return fmt.Sprintf(`WITH u AS (
	SELECT u.id, u.slot, u.n, %[1]s,
		EXISTS (SELECT 1 FROM %[2]s e WHERE %[3]s AND e.lock_slot = u.slot AND %[4]s)
		OR coalesce((SELECT (%[6]s) < (%[7]s) FROM %[2]s e WHERE %[3]s AND %[5]s
			AND (%[6]s) >= (SELECT %[12]s FROM %[2]s f WHERE f.id = u.first) AND e.id <> ALL ($1)
			ORDER BY %[6]s LIMIT 1), false) AS held
	FROM unnest($1::bigint[], $2::int[], $5::bigint[]) WITH ORDINALITY AS u(id, slot, first, n) JOIN %[2]s t ON t.id = u.id
), ok AS (
	SELECT u.id, u.slot FROM u WHERE NOT EXISTS (SELECT 1 FROM u x WHERE %[8]s AND x.n <= u.n AND x.held)
)
UPDATE %[2]s t SET %[9]s, lock_slot = ok.slot
FROM ok WHERE t.id = ok.id AND %[10]s
RETURNING %[11]s`, strings.Join(keyCols, ", "), table, sameKey(info, "e", "t"), states.Running("e"),
		eWaiting, strings.ReplaceAll(order, "t.", "e."), order, sameKey(info, "x", "u"), set, states.Waiting("t"), returning(info),
		strings.ReplaceAll(order, "t.", "f."))
}

// sameKey is the condition that rows a and b have the same key.
func sameKey(info *jobinfo.Info, a, b string) string {
	var same []string
	for _, k := range info.Key {
		c := pgx.Identifier{k}.Sanitize()
		same = append(same, fmt.Sprintf("%s.%s = %s.%s", a, c, b, c))
	}
	return strings.Join(same, " AND ")
}

// finishSQL records a batch of outcomes, fenced by each row's token, and enqueues the next runs asked
// for by RunAgain in the same statement. Rows whose token no longer matches (the lease was lost and
// the job taken back) are left alone and not returned.
func finishSQL(info *jobinfo.Info, table string) string {
	cols := info.Columns()
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = pgx.Identifier{c}.Sanitize()
	}
	onConflict := ""
	if len(info.Unique) > 0 {
		uniq := make([]string, len(info.Unique))
		for i, c := range info.Unique {
			uniq[i] = pgx.Identifier{c}.Sanitize()
		}
		onConflict = fmt.Sprintf("\n	ON CONFLICT (%s) WHERE %s DO NOTHING", strings.Join(uniq, ", "), jobinfo.UniqueWaitingCondition)
	}
	if len(info.Key) > 0 {
		return finishRunSQL(info, table, onConflict, quoted)
	}
	return fmt.Sprintf(`WITH u AS (
	SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int2[], $4::text[], $5::float8[]) AS u(id, token, outcome, err, delay)),
done AS (
	UPDATE %[1]s t SET lease_expires_at = NULL, lease_owner = NULL, lock_slot = NULL, updated_at = now(),
		processed_at = CASE WHEN u.outcome IN (%[2]d, %[3]d) THEN now() END,
		failed_at = CASE WHEN u.outcome = %[4]d THEN now() END,
		last_error = CASE WHEN u.outcome IN (%[5]d, %[4]d) THEN u.err ELSE t.last_error END,
		process_after = CASE WHEN u.outcome IN (%[5]d, %[6]d, %[7]d) THEN now() + make_interval(secs => u.delay) ELSE t.process_after END,
		attempts_made = CASE WHEN u.outcome IN (%[6]d, %[7]d) THEN t.attempts_made - 1 ELSE t.attempts_made END,
		started_at = CASE WHEN u.outcome = %[7]d AND t.attempts_made = 1%[14]s THEN NULL ELSE t.started_at END
	FROM u WHERE t.id = u.id AND t.lock_token = u.token AND %[8]s
	RETURNING t.id, u.outcome, u.delay),
again AS (
	INSERT INTO %[1]s (%[9]s, process_after)
	SELECT %[10]s, now() + make_interval(secs => d.delay) FROM %[1]s s JOIN done d ON s.id = d.id WHERE d.outcome = %[3]d%[11]s)
SELECT id, (SELECT pg_notify(%[12]s, %[13]s) WHERE $6) IS NULL FROM done`,
		table, outProcessed, outRunAgain, outFailed, outRetry, outSnooze, outRelease, states.StillRunning("t"),
		strings.Join(quoted, ", "), "s."+strings.Join(quoted, ", s."), onConflict,
		quote(uniqueness.NotifyChannel), quote(info.Name), neverRanAgain(info, table))
}

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
// goes back to wait, notifies the kind's channel. It runs with a plan made for its arguments (see
// runFinish).
func finishRunSQL(info *jobinfo.Info, table, onConflict string, quoted []string) string {
	var keyCols, tKeyCols []string
	for _, k := range info.Key {
		c := pgx.Identifier{k}.Sanitize()
		keyCols, tKeyCols = append(keyCols, c), append(tKeyCols, "t."+c)
	}
	order, due := "e.id", "(e.process_after IS NULL OR e.process_after <= now())"
	if info.Order == jobinfo.OrderProcessAfter {
		order, due = "COALESCE(e.process_after, e.created_at), e.id", "COALESCE(e.process_after, e.created_at) <= now()"
	}
	claimSet := `attempts_made = t.attempts_made + 1, started_at = now(), lease_expires_at = now() + make_interval(secs => $10),
		lease_owner = $11, lock_token = t.lock_token + 1, updated_at = now(),
		lock_slot = c.slots[array_position(c.ids, t.id)]`
	return fmt.Sprintf(`WITH u AS (
	SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int2[], $4::text[], $5::float8[], $7::int[]) AS u(id, token, outcome, err, delay, slot)),
done AS (
	UPDATE %[1]s t SET lease_expires_at = NULL, lease_owner = NULL, lock_slot = NULL, updated_at = now(),
		processed_at = CASE WHEN u.outcome IN (%[2]d, %[3]d) THEN now() END,
		failed_at = CASE WHEN u.outcome = %[4]d THEN now() END,
		last_error = CASE WHEN u.outcome IN (%[5]d, %[4]d) THEN u.err ELSE t.last_error END,
		process_after = CASE WHEN u.outcome IN (%[5]d, %[6]d, %[7]d) THEN now() + make_interval(secs => u.delay) ELSE t.process_after END,
		attempts_made = CASE WHEN u.outcome IN (%[6]d, %[7]d) THEN t.attempts_made - 1 ELSE t.attempts_made END,
		started_at = CASE WHEN u.outcome = %[7]d AND t.attempts_made = 1%[14]s THEN NULL ELSE t.started_at END
	FROM u WHERE t.id = u.id AND t.lock_token = u.token AND %[8]s
	RETURNING t.id, u.outcome, u.delay, u.slot, %[15]s),
again AS (
	INSERT INTO %[1]s (%[9]s, process_after)
	SELECT %[10]s, now() + make_interval(secs => d.delay) FROM %[1]s s JOIN done d ON s.id = d.id WHERE d.outcome = %[3]d%[11]s),
runs AS (
	SELECT d.id AS prev, d.slot, %[16]s, row_number() OVER (PARTITION BY %[16]s ORDER BY d.id) AS rn
	FROM done d WHERE d.slot >= 0 AND d.outcome IN (%[2]d, %[4]d)),
kl AS MATERIALIZED (
	SELECT coalesce(l.key_limit, $8) AS key_limit, l.max_running, coalesce(l.paused, false) AS paused
	FROM (SELECT) one LEFT JOIN jobpipe_kind_limits l ON l.kind = $9),
nxt AS (
	SELECT r.prev, r.slot, r.rn, w.ids FROM runs r CROSS JOIN kl CROSS JOIN LATERAL (
		SELECT coalesce((SELECT CASE WHEN l.paused THEN 0 ELSE coalesce(l.key_limit, kl.key_limit) END
			FROM jobpipe_key_limits l WHERE l.kind = $9 AND l.key_value = %[22]s), kl.key_limit) AS lim) x
	CROSS JOIN LATERAL (
		SELECT array_agg(e.id ORDER BY %[17]s) AS ids, bool_and(e.due) AS due, count(*) AS n FROM (
			SELECT e.id, e.created_at, e.process_after, %[18]s AS due FROM %[1]s e
			WHERE %[19]s AND %[20]s ORDER BY %[17]s LIMIT r.rn) e) w
	WHERE NOT kl.paused AND w.n = r.rn AND w.due
		AND r.slot < x.lim AND (SELECT e.id FROM %[1]s e WHERE %[19]s AND %[21]s AND e.lock_slot >= x.lim LIMIT 1) IS NULL
		AND (kl.max_running IS NULL OR (SELECT count(*) FROM %[1]s e WHERE %[21]s) < kl.max_running)),
free AS (
	SELECT t.id FROM %[1]s t WHERE t.id = ANY (ARRAY(SELECT unnest(ids) FROM nxt)) FOR UPDATE SKIP LOCKED),
claimable AS (
	SELECT array_agg(n.ids[n.rn]) AS ids, array_agg(n.prev) AS prevs, array_agg(n.slot) AS slots
	FROM nxt n WHERE n.ids <@ ARRAY(SELECT id FROM free)),
claimed AS (
	UPDATE %[1]s t SET %[23]s FROM claimable c
	WHERE t.id = ANY (c.ids) AND %[24]s
	RETURNING c.prevs[array_position(c.ids, t.id)] AS prev, %[25]s)
SELECT CASE WHEN c.prev IS NULL OR c.prev = (SELECT min(prev) FROM claimed) THEN (SELECT array_agg(id) FROM done) END,
	(SELECT pg_notify(%[12]s, %[13]s) WHERE $6 OR (SELECT count(*) FROM runs) > (SELECT count(*) FROM claimed)) IS NULL, c.*
FROM (SELECT) one LEFT JOIN claimed c ON true`,
		table, outProcessed, outRunAgain, outFailed, outRetry, outSnooze, outRelease, states.StillRunning("t"),
		strings.Join(quoted, ", "), "s."+strings.Join(quoted, ", s."), onConflict,
		quote(uniqueness.NotifyChannel), quote(info.Name), neverRanAgain(info, table),
		strings.Join(tKeyCols, ", "), strings.Join(keyCols, ", "), order, due,
		sameKey(info, "e", "r"), states.Waiting("e"), states.Running("e"),
		info.KeyText("r"), claimSet, states.Waiting("t"), returning(info))
}

// neverRanAgain is the extra condition under which a released claim of a job's first attempt (it never
// ran) makes the job "never started" again, so that it keeps blocking duplicates until executed: no
// other never-started job of its unique key arrived while it was claimed. If one did, the released job
// stays marked as started and the newer job carries the key.
func neverRanAgain(info *jobinfo.Info, table string) string {
	if len(info.Unique) == 0 {
		return ""
	}
	var same []string
	for _, c := range info.Unique {
		q := pgx.Identifier{c}.Sanitize()
		same = append(same, fmt.Sprintf("x.%s IS NOT DISTINCT FROM t.%s", q, q))
	}
	return fmt.Sprintf(" AND NOT EXISTS (SELECT 1 FROM %s x WHERE %s AND x.id <> t.id AND %s)",
		table, strings.Join(same, " AND "), states.NeverRan("x"))
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
