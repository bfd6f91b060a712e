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
// Only a claim committing while the statement runs can still make it fail (23505).
//
// Each row ends with last_of_key: no job of its key waited after it in the kind's order when the
// statement began (the rows it claims count as waiting), so that a key run from a key's last job does
// not look for the next one. The probe starts at the row, not at the dead index entries of the
// key's finished jobs before it.
const claimIDsSQL = `WITH u AS (
	SELECT u.id, u.slot, u.n, {{.KeyCols "t"}},
		EXISTS (SELECT 1 FROM {{.Table}} e WHERE {{.SameKey "e" "t"}} AND e.lock_slot = u.slot AND {{running "e"}})
		OR coalesce((SELECT ({{.Order "e"}}) < ({{.Order "t"}}) FROM {{.Table}} e WHERE {{.SameKey "e" "t"}} AND {{waiting "e"}}
			AND ({{.Order "e"}}) >= (SELECT {{.Order "f"}} FROM {{.Table}} f WHERE f.id = u.first) AND e.id <> ALL ($1)
			ORDER BY {{.Order "e"}} LIMIT 1), false) AS held
	FROM unnest($1::bigint[], $2::int[], $5::bigint[]) WITH ORDINALITY AS u(id, slot, first, n) JOIN {{.Table}} t ON t.id = u.id
), ok AS (
	SELECT u.id, u.slot FROM u WHERE NOT EXISTS (SELECT 1 FROM u x WHERE {{.SameKey "x" "u"}} AND x.n <= u.n AND x.held)
)
UPDATE {{.Table}} t SET {{.ClaimSet "$3" "$4"}}, lock_slot = ok.slot
FROM ok WHERE t.id = ok.id AND {{waiting "t"}}
RETURNING {{.Returning}}, NOT EXISTS (SELECT 1 FROM {{.Table}} e WHERE {{.SameKey "e" "t"}} AND {{waiting "e"}} AND ({{.Order "e"}}) > ({{.Order "t"}})) AS last_of_key`

var _ = parse(statements, map[string]string{"claimIDsSQL": claimIDsSQL})
