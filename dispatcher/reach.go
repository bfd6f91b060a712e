package dispatcher

import (
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// A lease is never rescued because of time in which its worker could not reach the database. When
// the database is unreachable (down, restarting, cut off), live workers can neither renew their
// leases nor write the outcomes of the jobs they finished, and those leases run out on the
// database's clock; rescued the moment the database is back, their jobs would run again although
// their workers are alive and their outcomes decided. So:
//   - a worker retries its outcomes for as long as the database does not answer (until Stop's
//     deadline), and claims nothing while outcomes or lease renewals of a kind wait for the database
//     (once they failed twice in a row: one failure is most often a single lost connection, and
//     holding claims back for it would stall the kind whenever a connection is lost);
//   - a node rescues only once its own statements have reached the database without a failure for
//     rescueQuiet, counted from the later of its Start and the first statement that worked after its
//     last failure (rescueGate), and only once the server has been up for rescueQuiet
//     (pg_postmaster_start_time() in the rescue statement, for a restart no statement of this node
//     saw). Every node tries to take the rescue lease each RescueInterval, so each notices an outage
//     longer than that; a takeLead that takes longer than HeartbeatInterval counts as a failure, since
//     renewals waiting that long time out.
//
// rescueQuiet covers a live worker's catch-up: its failed renewals are retried within a second and
// its heartbeats tick every HeartbeatInterval, each bounded by HeartbeatInterval; its outcomes are
// retried at least every second.

// rescueQuiet is how long a node must have reached the database without a failure, and the server
// been up, before it rescues: twice HeartbeatInterval plus a second.
func (c Config) rescueQuiet() time.Duration { return 2*c.HeartbeatInterval + time.Second }

// unreachable reports whether err, from one of the dispatcher's own statements, means the statement
// got no answer from the database: no connection (refused, reset, ended by a restart or an
// operator), or no reply in time. An error the server answered the statement with is not.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return true
	}
	// Connection exceptions; operator intervention ending the session (shutdown, crash, the server
	// starting up); too many connections: the session, not the statement, was refused.
	return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "53300"
}

// noteReach records err if it means the database could not be reached (see unreachable), for the
// rescue gate.
func (d *shared) noteReach(err error) {
	if unreachable(err) {
		d.unreachableAt.Store(time.Now().UnixNano())
	}
}

// rescueGate decides, in the leader's loop, whether this node may rescue now (see rescueQuiet).
type rescueGate struct {
	quiet time.Duration
	seen  int64     // the failure (Dispatcher.unreachableAt) last seen
	since time.Time // the node has reached the database without a failure since
}

func newRescueGate(quiet time.Duration, started time.Time) *rescueGate {
	return &rescueGate{quiet: quiet, since: started}
}

// open reports whether the node may rescue at now, a time after a statement of its reached the
// database; failedAt is its latest failure (Dispatcher.unreachableAt).
func (g *rescueGate) open(now time.Time, failedAt int64) bool {
	if failedAt != g.seen {
		// A failure since the last look: the database has been reachable again since now at the earliest.
		g.seen, g.since = failedAt, now
	}
	return now.Sub(g.since) >= g.quiet
}
