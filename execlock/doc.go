// Package execlock owns jobpipe's Redis locks: the queue and execution locks that keep jobs of the
// same concurrency key from running at once, and the slots that allow up to N of them. It uses
// go-redsync (Redlock), through its public API only, over 1, 3 or 5 independent Redis nodes.
//
// These locks give mutual exclusion and speed, not the last word. The database is the final
// fence: every write after a claim checks the row's lock token, and a unique index over the
// running rows' (key, slot) refuses a second claim of a slot, whatever Redis says.
//
// The dispatcher takes the queue lock of (kind, key, slot) with [Locker.TryQueueSlot] or
// [Locker.TryQueue] and hands the job to a worker. The worker takes the execution lock of the same
// (kind, key, slot) with [Locker.TryExec], releases the queue lock, extends the execution lock
// while the handler runs ([Lock.Extend]; [ErrLost] means the job must stop and not be recorded as
// done) and releases it when the job ends, even when its context was cancelled. The keys are
//
//	<prefix>q:<kind>:<key>:<slot>    queue lock       e.g. jobpipe:lock:q:email:user-42:0
//	<prefix>x:<kind>:<key>:<slot>    execution lock   e.g. jobpipe:lock:x:email:user-42:0
//
// A kind may not contain ':'; a key longer than [MaxKeyLen] bytes, or starting with "sha256:",
// appears as "sha256:" and its SHA-256 in hex. A lock's value is Config.NodeName, ':' and 128
// random bits, so a key seen in Redis tells who holds it.
//
// Every call makes one attempt, bounded by Config.CallTimeout even when nodes are down or stalled,
// and returns once a quorum has decided: [ErrTaken] for a busy key, [ErrUnavailable] for an outage.
// Over several nodes an attempt can also fail with nobody winning, which is safe. The commands to
// the other nodes run on to the deadline, in order, so that a lock reaches every node that answers
// and no delete overtakes its SET NX; a janitor deletes what a failed call may have left behind
// once its node answers again, for up to 10 minutes (see [Locker.Close]). Each node's commands go
// out in pipelines, one at a time, which concurrent calls share.
//
// An extension never re-takes a lapsed lock: it returns ErrLost. [Lock.Until] is an estimate, not
// a guarantee: a Redis node restarted without persistence forgets its locks, so a rolling restart
// can let a second holder in before the first's Until, and a paused process can outlive its lock
// unaware; until its next heartbeat, only the database's token fences the stale holder.
package execlock
