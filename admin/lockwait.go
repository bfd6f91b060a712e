package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// LockWait is a dispatcher in which a keyed kind's jobs wait for a quorum of Redis lock nodes: its
// lock calls for the kind keep failing. The dispatcher records it in jobpipe_lock_waits when it logs
// the WARN, refreshes it each minute, and deletes it when the calls succeed again or it stops.
type LockWait struct {
	// Dispatcher is the dispatcher's Config.NodeName.
	Dispatcher string
	// Since is when its lock calls for the kind began to fail, on the dispatcher's clock.
	Since time.Time
	// Error names each lock node that does not answer and its error ("node 10.0.0.5:6379: dial tcp
	// 10.0.0.5:6379: connect: connection refused", several joined by "; "), or holds the lock
	// calls' error when every node answers PING.
	Error string
}

// String describes the wait in one line: "waiting for Redis quorum since 2030-01-02 03:04:05 UTC in
// dispatcher web-1 (node 10.0.0.5:6379: ...)".
func (w LockWait) String() string {
	return fmt.Sprintf("waiting for Redis quorum since %s UTC in dispatcher %s (%s)",
		w.Since.UTC().Format(time.DateTime), w.Dispatcher, w.Error)
}

// LockWaitFresh is how recently a row of jobpipe_lock_waits must have been refreshed to count. Its
// dispatcher refreshes it every minute while the wait lasts, so an older row was left by a
// dispatcher that crashed.
const LockWaitFresh = 2 * time.Minute

// lockWaitsSQL reads the fresh rows, of every kind or of kind $2 when it is not NULL, oldest first.
const lockWaitsSQL = `SELECT kind, node_name, since, error FROM jobpipe_lock_waits
WHERE updated_at > now() - make_interval(secs => $1) AND ($2::text IS NULL OR kind = $2)
ORDER BY kind, since, node_name`

// LockWaits reads the dispatchers in which keyed kinds wait for a quorum of Redis lock nodes, by
// kind, oldest first; of every kind when kind is "". Rows older than LockWaitFresh are left out.
func LockWaits(ctx context.Context, db jobinfo.DB, kind string) (map[string][]LockWait, error) {
	var only *string
	if kind != "" {
		only = &kind
	}
	rows, err := db.Query(ctx, lockWaitsSQL, LockWaitFresh.Seconds(), only)
	if err != nil {
		return nil, fmt.Errorf("admin: reading jobpipe_lock_waits: %w", err)
	}
	out := map[string][]LockWait{}
	var name string
	var w LockWait
	_, err = pgx.ForEachRow(rows, []any{&name, &w.Dispatcher, &w.Since, &w.Error}, func() error {
		out[name] = append(out[name], w)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("admin: reading jobpipe_lock_waits: %w", err)
	}
	return out, nil
}
