package dispatcher

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/uniqueness"
)

// Conditions on a kind's rows, aliased t. They match the partial indexes jobinfo creates.
const (
	waitingCond = "t.lease_expires_at IS NULL AND t.processed_at IS NULL AND t.failed_at IS NULL"
	runningCond = "t.lease_expires_at IS NOT NULL"
)

// kindSQL holds a kind's statements, built once at registration from sanitised identifiers.
type kindSQL struct {
	// claimPlain claims up to $1 due jobs of a kind without a key. $2 lease seconds, $3 owner.
	claimPlain string
	// headsFast and headsScan lock up to $1 due heads of keys below their limit $2, in the kind's
	// order (see headsSQL); $3 bounds headsFast's walk and lists headsScan's ids to leave out.
	headsFast, headsScan string
	// claimIDs claims the rows $1 with slots $2. $3 lease seconds, $4 owner.
	claimIDs string
	// finish records outcomes: $1 ids, $2 tokens, $3 outcomes, $4 errors, $5 delays in seconds.
	finish string
	// extend renews the lease of $1 (token $2) by $3 seconds; returns a row when the fence held.
	extend string
	// nextDue is the earliest future process_after of a waiting job.
	nextDue string
	// rescue takes back up to 1000 expired leases; $1 max attempts, $2 retry delays by attempt.
	rescue string
}

// returning lists what a claim reads back, in the order scanClaimed expects: the pipeline columns,
// then the key text, then the data columns.
func returning(info *jobinfo.Info) string {
	key := "''"
	if len(info.Key) > 0 {
		key = info.KeyText("t")
	}
	cols := []string{"t.id", "t.attempts_made", "t.lock_token", "t.created_at", "t.process_after", "coalesce(t.lock_slot, -1)", key}
	for _, c := range info.Columns() {
		cols = append(cols, "t."+pgx.Identifier{c}.Sanitize())
	}
	return strings.Join(cols, ", ")
}

// pipelineColumns is how many columns returning puts before the data columns.
const pipelineColumns = 7

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
	SELECT t.id FROM %[1]s t WHERE %[2]s AND %[3]s ORDER BY %[4]s LIMIT $1 FOR UPDATE SKIP LOCKED)
UPDATE %[1]s t SET %[5]s
FROM next WHERE t.id = next.id
RETURNING %[6]s`, table, waitingCond, due, order, fmt.Sprintf(claimSet, "$2", "$3"), returning(info)),
		claimIDs: fmt.Sprintf(`UPDATE %[1]s t SET %[2]s, lock_slot = u.slot
FROM unnest($1::bigint[], $2::int[]) AS u(id, slot)
WHERE t.id = u.id AND %[3]s
RETURNING %[4]s`, table, fmt.Sprintf(claimSet, "$3", "$4"), waitingCond, returning(info)),
		extend: fmt.Sprintf(`UPDATE %s t SET lease_expires_at = now() + make_interval(secs => $3)
WHERE t.id = $1 AND t.lock_token = $2 AND %s RETURNING t.id`, table, runningCond),
		nextDue: fmt.Sprintf(`SELECT min(t.process_after) FROM %s t WHERE t.process_after > now() AND %s`, table, waitingCond),
		finish:  finishSQL(info, table),
		rescue: fmt.Sprintf(`WITH expired AS (
	SELECT t.id FROM %[1]s t WHERE t.lease_expires_at < now() AND t.processed_at IS NULL AND t.failed_at IS NULL
	ORDER BY t.lease_expires_at LIMIT 1000 FOR UPDATE SKIP LOCKED)
UPDATE %[1]s t SET lease_expires_at = NULL, lease_owner = NULL, lock_slot = NULL, lock_token = t.lock_token + 1,
	updated_at = now(),
	last_error = 'lease expired: ' || coalesce(t.lease_owner, 'a dispatcher') || ' stopped renewing it (worker died or stalled)',
	failed_at = CASE WHEN t.attempts_made >= $1 THEN now() END,
	process_after = CASE WHEN t.attempts_made >= $1 THEN t.process_after
		ELSE now() + make_interval(secs => ($2::float8[])[least(t.attempts_made, $1)]) END
FROM expired WHERE t.id = expired.id
RETURNING t.id, t.failed_at IS NOT NULL`, table),
	}
	if len(info.Key) > 0 {
		q.headsFast, q.headsScan = headsSQL(info, table, order, due)
	}
	return q
}

// Choosing the heads of keys (the first waiting job of each key, when it is due and its key runs fewer
// than its limit) takes two queries, because neither is fast in every shape of backlog:
//
//   - headsFast walks the first $3 waiting jobs in the kind's order and keeps the heads among them. When
//     it finds $1 heads, they are the first $1 eligible heads overall (any other lies later in the
//     order), and the pass costs O($3) whatever the backlog. With few keys and deep backlogs it finds
//     fewer, and cannot tell whether more heads lie further on.
//   - headsScan visits every key with waiting jobs (a skip scan: one index probe per key), takes each
//     key's head, and keeps the eligible ones in the kind's order: complete and fair, O(keys).
//
// A pass runs headsFast and, when it falls short, headsScan for the rest. Both lock what they return
// (FOR UPDATE SKIP LOCKED), so concurrent dispatchers take different heads, and a head being claimed
// elsewhere makes its key's next job no head until that claim commits. Each row comes with the slots
// its key's running jobs hold, so the slot lock is only tried on free slots.
func headsSQL(info *jobinfo.Info, table, order, due string) (fast, scan string) {
	var same, keyCols, keyVals []string
	for _, k := range info.Key {
		c := pgx.Identifier{k}.Sanitize()
		same = append(same, fmt.Sprintf("e.%s = t.%s", c, c))
		keyCols = append(keyCols, c)
		keyVals = append(keyVals, "k."+c)
	}
	eRunning := strings.ReplaceAll(runningCond, "t.", "e.")
	busy := fmt.Sprintf("CROSS JOIN LATERAL (SELECT coalesce(array_agg(e.lock_slot), '{}') AS slots FROM %s e WHERE %s AND %s) r",
		table, strings.Join(same, " AND "), eRunning)
	// Rows are fetched by id from an array (ARRAY(...)), which keeps the planner from driving the
	// join from the whole table. The walk takes waiting jobs whether due or not: a key's earlier job that is not due yet still
	// comes first in the order, so the head of every key met in the walk is the first of its key met,
	// found by a window over the walk, without probing the index once per job.
	fast = fmt.Sprintf(`WITH walk AS MATERIALIZED (
	SELECT t.id, row_number() OVER (PARTITION BY %[1]s ORDER BY %[2]s) AS pos
	FROM (SELECT t.* FROM %[3]s t WHERE %[4]s ORDER BY %[2]s LIMIT $3) t)
SELECT t.id, %[5]s, r.slots FROM %[3]s t %[6]s
WHERE t.id = ANY (ARRAY(SELECT id FROM walk WHERE pos = 1)) AND %[4]s AND %[7]s AND cardinality(r.slots) < $2
ORDER BY %[2]s LIMIT $1
FOR UPDATE OF t SKIP LOCKED`, strings.Join(prefixed("t.", keyCols), ", "), order, table, waitingCond, info.KeyText("t"), busy, due)
	keyTuple, nextTuple := "("+strings.Join(keyCols, ", ")+")", "("+strings.Join(keyVals, ", ")+")"
	var headSame []string
	for _, c := range keyCols {
		headSame = append(headSame, fmt.Sprintf("t.%s = k.%s", c, c))
	}
	scan = fmt.Sprintf(`WITH RECURSIVE k AS (
	(SELECT %[1]s FROM %[2]s t WHERE %[3]s ORDER BY %[1]s LIMIT 1)
	UNION ALL
	SELECT n.* FROM k CROSS JOIN LATERAL (
		SELECT %[1]s FROM %[2]s t WHERE %[3]s AND %[4]s > %[5]s ORDER BY %[1]s LIMIT 1) n
), heads AS (
	SELECT h.id FROM k CROSS JOIN LATERAL (
		SELECT t.id, t.process_after, t.created_at FROM %[2]s t WHERE %[3]s AND %[6]s ORDER BY %[7]s LIMIT 1) h
)
SELECT t.id, %[8]s, r.slots FROM %[2]s t %[9]s
WHERE t.id = ANY (ARRAY(SELECT id FROM heads)) AND %[3]s AND %[10]s AND cardinality(r.slots) < $2 AND t.id <> ALL($3)
ORDER BY %[7]s LIMIT $1
FOR UPDATE OF t SKIP LOCKED`, strings.Join(keyCols, ", "), table, waitingCond, keyTuple, nextTuple,
		strings.Join(headSame, " AND "), order, info.KeyText("t"), busy, due)
	return fast, scan
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
SELECT id, (SELECT pg_notify(%[12]s, %[13]s)) IS NULL FROM done`,
		table, outProcessed, outRunAgain, outFailed, outRetry, outSnooze, outRelease, runningCond,
		strings.Join(quoted, ", "), "s."+strings.Join(quoted, ", s."), onConflict,
		quote(uniqueness.NotifyChannel), quote(info.Name), neverRanAgain(info, table))
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
	return fmt.Sprintf(" AND NOT EXISTS (SELECT 1 FROM %s x WHERE %s AND x.id <> t.id AND x.started_at IS NULL AND x.processed_at IS NULL AND x.failed_at IS NULL)",
		table, strings.Join(same, " AND "))
}

func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// HeadsQueries returns the two statements a dispatcher runs to choose the jobs of a keyed kind it may
// start (see the comment on headsSQL in queries.go): fast walks the first $3 waiting jobs, scan visits
// every key ($3: ids to leave out, an int8 array). Both take $1 (most rows) and $2 (the key limit),
// return id, key text and busy slots, and lock FOR UPDATE SKIP LOCKED (run them in a transaction).
// They are exported for benchmarks and EXPLAIN; both are "" for kinds without a key.
func HeadsQueries(info *jobinfo.Info) (fast, scan string) {
	q := buildSQL(info)
	return q.headsFast, q.headsScan
}
