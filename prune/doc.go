// Package prune deletes finished jobs (processed, failed) older than a retention from a kind's table,
// in small batches.
//
// The dispatcher runs it for each kind it leads (lease "prune:<kind>" in jobpipe_leaders) every
// Config.PruneInterval, with the kind's retention (jobinfo.Retention); `jobpipe prune` runs it on
// demand.
//
// A kind's table has no index on the finish times, and pruning must not add one to every finish.
// So Run walks the table in id order, through the primary key, a window of BatchSize rows per
// statement: each statement deletes the finished rows of its window that are old enough, in its
// own short transaction (when db is a pool), and holds only those rows' locks, for milliseconds.
// There is no sort and no scan of the whole table per statement. The walk stops at the first window
// whose rows were all created after the oldest cutoff: a job finishes after it is created, so no
// later row can be old enough (ids follow creation, up to transactions that were open a long time
// while others committed; such a row is pruned by a later run). The cost of a run is the rows it
// deletes plus the rows it passes over: finished ones still within their retention and old
// waiting ones.
//
// A row is deleted only if it is processed or failed, not leased, and finished before the cutoff,
// and the DELETE checks that again on the row's latest version: a job retried by hand meanwhile (back
// to waiting), or a running one, is never deleted.
package prune
