package kindsql

// claimIDsSQL claims the rows $1 of a keyed kind, in the kind's order, with slots $2. Its snapshot is
// fresh, and it leaves a row waiting, with the later rows of its key, when
//   - a running job of its key holds its slot (a claim committed elsewhere after the dispatcher read
//     the slots, whose queue lock was already given back), rather than be refused by the
//     running-slots index; or
//   - an earlier job of its key waits and is not claimed with it: the heads query skipped that job
//     while another dispatcher held it, and that dispatcher gave it back. Started now, the row would
//     overtake it (I5). Such a job was waiting when the heads were chosen, so it lies at or after
//     the key's first waiting job then ($5, per row): the probe starts there, not at the dead index
//     entries of the key's finished jobs.
//
// The first check is a scalar subquery, one probe of the running-slots index per row: as EXISTS it
// was planned as a hashed subplan that read the entries of every running job, and of jobs that ran
// before them, once per claim.
//
// Only a claim committing while the statement runs can still make it fail (23505).
//
// Each row ends with last_of_key: no job of its key waited after it in the kind's order when the
// statement began (the rows it claims count as waiting), so that a key run from a key's last job does
// not look for the next one. The probe starts at the row, not at the dead index entries of the
// key's finished jobs before it.
const claimIDsSQL = `WITH u AS (
	SELECT u.id, u.slot, u.n, {{.KeyCols "t"}},
		(SELECT e.id FROM {{.Table}} e WHERE {{.SameKey "e" "t"}} AND e.lock_slot = u.slot AND {{running "e"}} LIMIT 1) IS NOT NULL
		OR coalesce((SELECT ({{.Order "e"}}) < ({{.Order "t"}}) FROM {{.Table}} e WHERE {{.InKey "e" "t"}} AND {{waiting "e"}}
			AND ({{.Order "e"}}) >= (SELECT {{.Order "f"}} FROM {{.Table}} f WHERE f.id = u.first) AND e.id <> ALL ($1)
			ORDER BY {{.KeyOrder "e"}} LIMIT 1), false) AS held
	FROM unnest($1::bigint[], $2::int[], $5::bigint[]) WITH ORDINALITY AS u(id, slot, first, n) JOIN {{.Table}} t ON t.id = u.id
), ok AS (
	SELECT u.id, u.slot FROM u WHERE NOT EXISTS (SELECT 1 FROM u x WHERE {{.SameKey "x" "u"}} AND x.n <= u.n AND x.held)
)
UPDATE {{.Table}} t SET {{.ClaimSet "$3" "$4"}}, lock_slot = ok.slot
FROM ok WHERE t.id = ok.id AND {{waiting "t"}}
RETURNING {{.Returning}}, (SELECT e.id FROM {{.Table}} e WHERE {{.InKey "e" "t"}} AND {{waiting "e"}} AND ({{.Order "e"}}) > ({{.Order "t"}})
	ORDER BY {{.KeyOrder "e"}} LIMIT 1) IS NULL AS last_of_key`

// nextOfKeysSQL locks, for each row $1 of a keyed kind, the first $2 waiting jobs of its key in the
// kind's order, SKIP LOCKED. It returns each row of $1 with the ids of its key's jobs, in order, that
// the statement locked and that are due, up to the first that it did not lock or that is not due: the
// jobs a claim of that many may start, from the key's first waiting one, none overtaking another.
const nextOfKeysSQL = `WITH u AS (
	SELECT * FROM unnest($1::bigint[], $2::int[]) AS u(head, n)),
cand AS MATERIALIZED (
	SELECT u.head, e.id, e.due, e.pos FROM u JOIN {{.Table}} h ON h.id = u.head CROSS JOIN LATERAL (
		SELECT e.id, {{.Due "e"}} AS due, row_number() OVER (ORDER BY {{.KeyOrder "e"}}) AS pos FROM {{.Table}} e
		WHERE {{.InKey "e" "h"}} AND {{waiting "e"}} ORDER BY {{.KeyOrder "e"}} LIMIT u.n) e),
free AS (
	SELECT t.id FROM {{.Table}} t WHERE t.id = ANY (ARRAY(SELECT id FROM cand)) AND {{waiting "t"}} FOR UPDATE SKIP LOCKED),
taken AS (
	SELECT c.head, c.id, c.pos, bool_and(c.due AND f.id IS NOT NULL) OVER (PARTITION BY c.head ORDER BY c.pos) AS ok
	FROM cand c LEFT JOIN free f ON f.id = c.id)
SELECT head, array_agg(id ORDER BY pos) FILTER (WHERE ok) FROM taken GROUP BY head`

var _ = parse(statements, map[string]string{"claimIDsSQL": claimIDsSQL, "nextOfKeys": nextOfKeysSQL})
