package heads

import (
	"github.com/jobpipe/jobpipe/internal/kindsql"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// Queries returns the two statements of a keyed kind's heads pass (see headsSQL): fast walks the
// first $3 waiting jobs, scan visits every key ($3: ids to leave out, an int8 array). Both take $1
// (most rows), $2 (the kind's per-key limit) and $4 (the kind's name, for its key overrides), return
// id, key text, busy slots, the key's limit, the job's position among its key's waiting jobs, the id
// of the key's first waiting job and the walk's length (0 for scan), and lock FOR UPDATE SKIP LOCKED
// (run them in a transaction; see headsSQL for the rows they leave unlocked). Both are "" for kinds
// without a key.
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
// return of keys that run nothing (FOR UPDATE SKIP LOCKED), so concurrent dispatchers take different
// jobs; a job being claimed elsewhere still counts in its key's numbering, so two dispatchers together
// never start more than L-r of a key. The heads of a key that runs jobs come back unlocked: its key
// runs claim its next jobs as they finish, and would end if a pass held them while it takes its
// queue locks (the dispatcher locks them after those). Each row comes with its key's limit, the slots its running jobs hold, and its position
// among the key's waiting jobs, so slot locks are only tried on free slots (the position picks which
// one first: see the dispatcher's claimKeyed), and a key at its limit is neither claimed nor locked:
// it waits.
func headsSQL(info *jobinfo.Info) (fast, scan string) { return kindsql.Heads(info) }
