package heads

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/states"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// Queries returns the two statements of a keyed kind's heads pass (see headsSQL): fast walks the
// first $3 waiting jobs, scan visits every key ($3: ids to leave out, an int8 array). Both take $1
// (most rows), $2 (the kind's per-key limit) and $4 (the kind's name, for its key overrides), return
// id, key text, busy slots, the key's limit, the job's position among its key's waiting jobs, the id
// of the key's first waiting job and the walk's length (0 for scan), and lock FOR UPDATE SKIP LOCKED
// (run them in a transaction). Both are "" for kinds without a key.
func Queries(info *jobinfo.Info) (fast, scan string) {
	if len(info.Key) == 0 {
		return "", ""
	}
	return headsSQL(info)
}

// Choosing the jobs of a keyed kind to start takes two queries, because neither is fast in every shape
// of backlog. A key whose limit is L (its override in jobpipe_key_limits, else the kind's default $2;
// 0 when paused) and which runs r jobs may start its first L-r waiting jobs in the kind's order, as
// long as none before them in its order is waiting for its time (under created order, a job that is
// not due holds back the later jobs of its key). Those are its "heads".
//
//   - fast walks the first $3 waiting jobs in the kind's order and numbers them within their key (a
//     window over the walk, not an index probe per job). When it finds $1 heads they are the first $1
//     heads overall (any other lies later in the order), and the pass costs O($3) whatever the
//     backlog. With few keys and deep backlogs it finds fewer, and cannot tell whether more lie on.
//   - scan visits every key with waiting jobs (a skip scan: one index probe per key), takes each
//     key's heads, and keeps them in the kind's order: complete and fair, O(keys).
//
// A pass runs fast and, when it falls short, scan for the rest (see Pass.Pick). Both lock what they
// return (FOR UPDATE SKIP LOCKED), so concurrent dispatchers take different jobs; a job being claimed
// elsewhere still counts in its key's numbering, so two dispatchers together never start more than
// L-r of a key. Each row comes with its key's limit, the slots its running jobs hold, and its position
// among the key's waiting jobs, so slot locks are only tried on free slots (the position picks which
// one first: see the dispatcher's claimKeyed), and a key at its limit is neither claimed nor locked:
// it waits.
func headsSQL(info *jobinfo.Info) (fast, scan string) {
	table := info.Table.Sanitize()
	order, due := "t.id", "(t.process_after IS NULL OR t.process_after <= now())"
	if info.Order == jobinfo.OrderProcessAfter {
		order, due = "COALESCE(t.process_after, t.created_at), t.id", "COALESCE(t.process_after, t.created_at) <= now()"
	}
	var keyCols []string
	for _, k := range info.Key {
		keyCols = append(keyCols, pgx.Identifier{k}.Sanitize())
	}
	sameKey := func(a, b string) string { return sameKey(info, a, b) }
	// keyState is the select list and joins that give each key k its limit and busy slots. Most kinds
	// have no key overrides: one look at jobpipe_key_limits (an InitPlan, run once) spares them a
	// probe per key.
	keyState := fmt.Sprintf(`CASE WHEN (SELECT EXISTS (SELECT 1 FROM jobpipe_key_limits l WHERE l.kind = $4))
		THEN coalesce((SELECT CASE WHEN l.paused THEN 0 ELSE coalesce(l.key_limit, $2) END
			FROM jobpipe_key_limits l WHERE l.kind = $4 AND l.key_value = %[1]s), $2)
		ELSE $2 END AS lim, r.slots
	FROM %%s k CROSS JOIN LATERAL (
		SELECT coalesce(array_agg(e.lock_slot), '{}') AS slots FROM %[2]s e WHERE %[3]s AND %[4]s) r`,
		info.KeyText("k"), table, sameKey("e", "k"), states.Running("e"))
	// final locks the chosen rows (CTE picks) in the kind's order, with their key's state, and ends
	// each row with the walk's length (%%s; 0 for the scan).
	// Rows are fetched by the tuple ids (ctid) the statement read them at, from an array (ARRAY(...)):
	// a TID scan, cheaper than looking the ids up in an index, and the array keeps the
	// planner from driving the join from the whole table. Both reads share the statement's snapshot,
	// so the tuple is the one read; one updated since by a committed transaction is re-checked
	// against the waiting conditions when it is locked, as it would be found by id. picks carries its
	// key's state, so that no join by key is needed here: joined to keys, the planner misjudged the
	// CTEs' sizes and compared every chosen row with every key.
	final := fmt.Sprintf(`SELECT t.id, %[1]s, p.slots, p.lim, p.pos, p.first_id, %%s FROM %[2]s t JOIN picks p ON p.id = t.id
WHERE t.ctid = ANY (ARRAY(SELECT tid FROM picks)) AND %[3]s AND %[4]s%%s
ORDER BY %[5]s LIMIT $1
FOR UPDATE OF t SKIP LOCKED`, info.KeyText("t"), table, states.Waiting("t"), due, order)
	cols := strings.Join(keyCols, ", ")
	tCols := strings.Join(prefixed("t.", keyCols), ", ")
	fast = fmt.Sprintf(`WITH walk AS MATERIALIZED (
	SELECT t.id, t.ctid AS tid, %[1]s, row_number() OVER w AS pos, bool_and(%[2]s) OVER w AS due, first_value(t.id) OVER w AS first_id
	FROM (SELECT t.id, t.ctid, t.created_at, t.process_after, %[1]s FROM %[3]s t WHERE %[4]s ORDER BY %[5]s LIMIT $3) t
	WINDOW w AS (PARTITION BY %[1]s ORDER BY %[5]s)
), keys AS MATERIALIZED (
	SELECT k.*, %[6]s
), picks AS (
	SELECT w.id, w.tid, w.pos, w.first_id, k.lim, k.slots FROM walk w JOIN keys k ON %[7]s WHERE w.due AND w.pos <= k.lim - cardinality(k.slots)
)
%[8]s`, tCols, due, table, states.Waiting("t"), order,
		fmt.Sprintf(keyState, "(SELECT DISTINCT "+cols+" FROM walk)"), sameKey("w", "k"),
		fmt.Sprintf(final, "(SELECT count(*) FROM walk)", ""))
	keyTuple := "(" + tCols + ")"
	kTuple := "(" + strings.Join(prefixed("k.", keyCols), ", ") + ")"
	scan = fmt.Sprintf(`WITH RECURSIVE walked AS (
	(SELECT %[1]s FROM %[2]s t WHERE %[3]s ORDER BY %[1]s LIMIT 1)
	UNION ALL
	SELECT n.* FROM walked k CROSS JOIN LATERAL (
		SELECT %[1]s FROM %[2]s t WHERE %[3]s AND %[4]s > %[5]s ORDER BY %[1]s LIMIT 1) n
), keys AS MATERIALIZED (
	SELECT k.*, %[6]s
), picks AS (
	SELECT h.id, h.tid, h.pos, h.first_id, k.lim, k.slots FROM keys k CROSS JOIN LATERAL (
		SELECT t.id, t.ctid AS tid, bool_and(t.is_due) OVER o AS due, row_number() OVER o AS pos, first_value(t.id) OVER o AS first_id FROM (
			SELECT t.id, t.ctid, t.created_at, t.process_after, %[8]s AS is_due FROM %[2]s t
			WHERE %[3]s AND %[9]s ORDER BY %[7]s LIMIT greatest(k.lim - cardinality(k.slots), 0)) t
		WINDOW o AS (ORDER BY %[7]s)) h
	WHERE h.due
)
%[10]s`, tCols, table, states.Waiting("t"), keyTuple, kTuple, fmt.Sprintf(keyState, "walked"), order, due,
		sameKey("t", "k"), fmt.Sprintf(final, "0::int8", " AND t.id <> ALL($3)"))
	return fast, scan
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

func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}
