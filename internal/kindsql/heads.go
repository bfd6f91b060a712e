package kindsql

import "github.com/jobpipe/jobpipe/jobinfo"

// Heads returns the two statements of a keyed kind's heads pass: fast walks the first $3 waiting jobs,
// scan visits every key ($3: ids to leave out). Package internal/heads says how they are used.
// Both are "" for a kind without a key.
func Heads(info *jobinfo.Info) (fast, scan string) {
	k := newKind(info)
	if !k.Keyed {
		return "", ""
	}
	return render("headsFast", k), render("headsScan", k)
}

// headsKeys is the data of the template headsKeys: the kind, and the relation of keys it reads.
type headsKeys struct {
	*kind
	Keys string
}

// HeadsKeys is the data for headsKeys over the relation keys.
func (k *kind) HeadsKeys(keys string) headsKeys { return headsKeys{k, keys} }

// headsFinal is the data of the template headsFinal: the kind, the walk's length as an expression and
// an extra condition on the rows.
type headsFinal struct {
	*kind
	Walked, Except string
}

// HeadsFinal is the data for headsFinal.
func (k *kind) HeadsFinal(walked, except string) headsFinal { return headsFinal{k, walked, except} }

// headsKeysSQL is the select list and joins that give each key k its limit and busy slots. Most kinds
// have no key overrides: one look at jobpipe_key_limits (an InitPlan, run once) spares them a probe
// per key.
const headsKeysSQL = `CASE WHEN (SELECT EXISTS (SELECT 1 FROM jobpipe_key_limits l WHERE l.kind = $4))
		THEN coalesce((SELECT CASE WHEN l.paused THEN 0 ELSE coalesce(l.key_limit, $2) END
			FROM jobpipe_key_limits l WHERE l.kind = $4 AND l.key_value = {{.KeyText "k"}}), $2)
		ELSE $2 END AS lim, r.slots
	FROM {{.Keys}} k CROSS JOIN LATERAL (
		{{.KeySlots "k"}}) r`

// headsFinalSQL returns the chosen rows (CTE picks) in the kind's order, with their key's state, and
// ends each row with the walk's length (0 for the scan). It locks (CTE locked) only the rows of keys
// that run nothing: the key runs of a key that does claim its next jobs as they finish, and would end
// at their next job if a pass held it locked while it takes its queue locks. Those rows are locked
// after the queue locks, by NextOfKeys.
//
// Rows are fetched by the tuple ids (ctid) the statement read them at, from an array (ARRAY(...)): a
// TID scan, cheaper than looking the ids up in an index, and the array keeps the planner from driving
// the join from the whole table. Both reads share the statement's snapshot, so the tuple is the one
// read; one updated since by a committed transaction is re-checked against the waiting conditions when
// it is locked, as it would be found by id. picks carries its key's state, so that no join by key is
// needed here: joined to keys, the planner misjudged the CTEs' sizes and compared every chosen row
// with every key.
const headsFinalSQL = `, locked AS (
	SELECT t.id FROM {{.Table}} t
	WHERE t.ctid = ANY (ARRAY(SELECT tid FROM picks WHERE cardinality(slots) = 0)) AND {{waiting "t"}} AND {{.Due "t"}}{{.Except}}
	ORDER BY {{.Order "t"}} LIMIT $1
	FOR UPDATE OF t SKIP LOCKED)
SELECT t.id, {{.KeyText "t"}}, p.slots, p.lim, p.pos, p.first_id, {{.Walked}} FROM {{.Table}} t JOIN picks p ON p.id = t.id
WHERE t.ctid = ANY (ARRAY(SELECT tid FROM picks)) AND {{waiting "t"}} AND {{.Due "t"}}{{.Except}}
	AND (cardinality(p.slots) > 0 OR t.id = ANY (ARRAY(SELECT id FROM locked)))
ORDER BY {{.Order "t"}} LIMIT $1`

// headsFastSQL numbers the first $3 waiting jobs within their key, a window over the walk.
const headsFastSQL = `WITH walk AS MATERIALIZED (
	SELECT t.id, t.ctid AS tid, {{.KeyCols "t"}}, row_number() OVER w AS pos, bool_and({{.Due "t"}}) OVER w AS due, first_value(t.id) OVER w AS first_id
	FROM (SELECT t.id, t.ctid, t.created_at, t.process_after, {{.KeyCols "t"}} FROM {{.Table}} t WHERE {{waiting "t"}} ORDER BY {{.Order "t"}} LIMIT $3) t
	WINDOW w AS (PARTITION BY {{.KeyCols "t"}} ORDER BY {{.Order "t"}})
), keys AS MATERIALIZED (
	SELECT k.*, {{template "headsKeys" .HeadsKeys (printf "(SELECT DISTINCT %s FROM walk)" (.KeyCols ""))}}
), picks AS (
	SELECT w.id, w.tid, w.pos, w.first_id, k.lim, k.slots FROM walk w JOIN keys k ON {{.SameKey "w" "k"}} WHERE w.due AND w.pos <= k.lim - cardinality(k.slots)
)
{{template "headsFinal" .HeadsFinal "(SELECT count(*) FROM walk)" ""}}`

// headsScanSQL visits every key with waiting jobs (a skip scan: one index probe per key) and takes
// each key's heads.
const headsScanSQL = `WITH RECURSIVE walked AS (
	(SELECT {{.KeyCols "t"}} FROM {{.Table}} t WHERE {{waiting "t"}} ORDER BY {{.KeyCols "t"}} LIMIT 1)
	UNION ALL
	SELECT n.* FROM walked k CROSS JOIN LATERAL (
		SELECT {{.KeyCols "t"}} FROM {{.Table}} t WHERE {{waiting "t"}} AND ({{.KeyCols "t"}}) > ({{.KeyCols "k"}}) ORDER BY {{.KeyCols "t"}} LIMIT 1) n
), keys AS MATERIALIZED (
	SELECT k.*, {{template "headsKeys" .HeadsKeys "walked"}}
), picks AS (
	SELECT h.id, h.tid, h.pos, h.first_id, k.lim, k.slots FROM keys k CROSS JOIN LATERAL (
		SELECT t.id, t.ctid AS tid, bool_and(t.is_due) OVER o AS due, row_number() OVER o AS pos, first_value(t.id) OVER o AS first_id FROM (
			SELECT t.id, t.ctid, t.created_at, t.process_after, {{.Due "t"}} AS is_due FROM {{.Table}} t
			WHERE {{waiting "t"}} AND {{.InKey "t" "k"}} ORDER BY {{.KeyOrder "t"}} LIMIT greatest(k.lim - cardinality(k.slots), 0)) t
		WINDOW o AS (ORDER BY {{.Order "t"}})) h
	WHERE h.due
)
{{template "headsFinal" .HeadsFinal "0::int8" " AND t.id <> ALL($3)"}}`

// skipScanSQL is the bench's alternative to the heads pass: see internal/bench.
const skipScanSQL = `WITH RECURSIVE h AS (
	(SELECT {{.KeyCols "t"}}, t.id FROM {{.Table}} t WHERE {{waiting "t"}} ORDER BY {{.KeyCols "t"}}, {{.Order "t"}} LIMIT 1)
	UNION ALL
	SELECT n.* FROM h CROSS JOIN LATERAL (
		SELECT {{.KeyCols "t"}}, t.id FROM {{.Table}} t WHERE {{waiting "t"}} AND ({{.KeyCols "t"}}) > ({{.KeyCols "h"}}) ORDER BY {{.KeyCols "t"}}, {{.Order "t"}} LIMIT 1) n
)
SELECT t.id, {{.KeyText "t"}} FROM h JOIN {{.Table}} t ON t.id = h.id
WHERE {{.Due "t"}} AND (SELECT count(*) FROM {{.Table}} e WHERE {{.SameKey "e" "t"}} AND {{running "e"}}) < $2
LIMIT $1
FOR UPDATE OF t SKIP LOCKED`

// SkipScan is the bench's key-order skip scan of a keyed kind ("" for a kind without a key): $1 most
// rows, $2 the per-key limit.
func SkipScan(info *jobinfo.Info) string {
	k := newKind(info)
	if !k.Keyed {
		return ""
	}
	return render("skipScan", k)
}

var _ = parse(statements, map[string]string{
	"headsKeys": headsKeysSQL, "headsFinal": headsFinalSQL, "headsFast": headsFastSQL, "headsScan": headsScanSQL,
	"skipScan": skipScanSQL,
})
