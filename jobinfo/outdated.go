package jobinfo

import (
	"context"
	"fmt"

	"github.com/jobpipe/jobpipe/internal/states"
)

// outdatedIndexesQuery lists the table's indexes whose predicate is the one an older version gave the
// ready index ($2, its first column id or the order expression) or the lease index ($3, its first column
// lease_expires_at). The key-ready and running-slots indexes share those predicates; their first
// column is the key.
const outdatedIndexesQuery = `
SELECT c.relname, pg_get_expr(i.indpred, i.indrelid) = $3
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
WHERE i.indrelid = to_regclass($1) AND NOT i.indisunique
  AND ((pg_get_expr(i.indpred, i.indrelid) = $2 AND (i.indkey[0] = 0 OR a.attname = 'id'))
    OR (pg_get_expr(i.indpred, i.indrelid) = $3 AND a.attname = 'lease_expires_at'))
ORDER BY c.relname`

// OutdatedIndexes describes, one line each, the indexes of the kind's table that an older version
// created with a predicate that the lookups of one key's jobs also match: with statistics taken at the
// wrong moment, the planner may walk them for each key. The table works as it is; each line says how
// to replace the index. Dispatcher.Start logs them. A kind without a key has no such lookups: none
// of its indexes is outdated.
func (i *Info) OutdatedIndexes(ctx context.Context, db DB) ([]string, error) {
	if len(i.Key) == 0 {
		return nil, nil
	}
	table := i.Table.Sanitize()
	rows, err := db.Query(ctx, outdatedIndexesQuery, table, states.WaitingDeparsed(), states.RunningDeparsed())
	if err != nil {
		return nil, fmt.Errorf("jobinfo: reading the indexes of %s: %w", table, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var name string
		var lease bool
		if err := rows.Scan(&name, &lease); err != nil {
			return nil, fmt.Errorf("jobinfo: reading the indexes of %s: %w", table, err)
		}
		index, pred := "ready", states.Ready("")
		if lease {
			index, pred = "lease", states.Leased("")
		}
		lines = append(lines, fmt.Sprintf("the %s index %q of %s has the predicate of an older version, "+
			"which the lookups of one key's jobs also match: create it again with WHERE %s "+
			"(as TableSpec.CreateSQL or `jobpipe kind new` print it), then drop the old one", index, name, table, pred))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("jobinfo: reading the indexes of %s: %w", table, err)
	}
	return lines, nil
}
