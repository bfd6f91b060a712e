package prune

import (
	"github.com/jobpipe/jobpipe/internal/kindsql"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// batchSQL deletes the finished rows past their retention in the window of the $2 rows after id $1
// ($3 and $4: the cutoffs in seconds for processed and failed rows); kindsql.Prune documents it.
func batchSQL(info *jobinfo.Info) string {
	batch, _ := kindsql.Prune(info)
	return batch
}

// maxIDSQL reads the highest id, for progress.
func maxIDSQL(info *jobinfo.Info) string {
	_, maxID := kindsql.Prune(info)
	return maxID
}
