package jobinfo

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/states"
)

// outdatedIndexesQuery lists the table's lease indexes (first column lease_expires_at) whose predicate
// is the one an older version gave them ($2), the running-slots index's.
const outdatedIndexesQuery = `
SELECT c.relname
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
WHERE i.indrelid = to_regclass($1) AND NOT i.indisunique AND a.attname = 'lease_expires_at'
  AND pg_get_expr(i.indpred, i.indrelid) = $2
ORDER BY c.relname`

// OutdatedIndexes describes, one line each, the indexes of the kind's table that an older version
// created with a predicate that the lookups of one key's running jobs also match: with statistics
// taken while nothing ran, the planner may walk them for each key. The table works as it is; each
// line says how to replace the index. Dispatcher.Start logs them. A kind without a key has no such
// lookups: none of its indexes is outdated.
func (i *Info) OutdatedIndexes(ctx context.Context, db DB) ([]string, error) {
	if len(i.Key) == 0 {
		return nil, nil
	}
	table := i.Table.Sanitize()
	rows, err := db.Query(ctx, outdatedIndexesQuery, table, states.RunningDeparsed())
	if err != nil {
		return nil, fmt.Errorf("jobinfo: reading the indexes of %s: %w", table, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("jobinfo: reading the indexes of %s: %w", table, err)
	}
	lines := make([]string, len(names))
	for n, name := range names {
		lines[n] = fmt.Sprintf("the lease index %q of %s has the predicate of an older version, "+
			"which the lookups of one key's running jobs also match: create it again with WHERE %s "+
			"(as TableSpec.CreateSQL or `jobpipe kind new` print it), then drop the old one", name, table, states.Leased(""))
	}
	return lines, nil
}
