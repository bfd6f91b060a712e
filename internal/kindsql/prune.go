package kindsql

import "github.com/jobpipe/jobpipe/jobinfo"

// pruneBatchSQL deletes, from the window of the $2 rows after id $1 in id order, the rows finished
// before their cutoff ($3 seconds ago for processed rows, $4 for failed ones; NULL keeps them). It
// returns the window's last id (NULL past the table's end), whether any row of the window was created
// before the later of the cutoffs, and how many processed and failed rows it deleted.
//
// Both the window and the DELETE go through the primary key; the DELETE's conditions are evaluated
// again on a row's latest version if it changed meanwhile (READ COMMITTED re-checks), so a row that
// went back to waiting, or was claimed, stays.
const pruneBatchSQL = `WITH win AS (
	SELECT max(w.id) AS hi, coalesce(bool_or(w.created_at < now() - make_interval(secs => least($3::float8, $4::float8))), false) AS old
	FROM (SELECT t.id, t.created_at FROM {{.Table}} t WHERE t.id > $1::int8 ORDER BY t.id LIMIT $2::int8) w
), gone AS (
	DELETE FROM {{.Table}} t WHERE t.id > $1 AND t.id <= (SELECT hi FROM win) AND {{notRunning "t"}} AND (
		(t.processed_at < now() - make_interval(secs => $3::float8)) OR (t.failed_at < now() - make_interval(secs => $4::float8)))
	RETURNING {{processed "t"}} AS processed
)
SELECT (SELECT hi FROM win), (SELECT old FROM win),
	count(*) FILTER (WHERE processed), count(*) FILTER (WHERE NOT processed) FROM gone`

// Prune returns prune's statements for info: batch deletes the finished rows past their retention in
// one window of ids (see pruneBatchSQL), maxID reads the highest id, for progress.
func Prune(info *jobinfo.Info) (batch, maxID string) {
	k := newKind(info)
	return render("pruneBatch", k), render("pruneMaxID", k)
}

var _ = parse(statements, map[string]string{
	"pruneBatch": pruneBatchSQL,
	"pruneMaxID": `SELECT coalesce(max(id), 0) FROM {{.Table}}`,
})
