// Package execlock owns jobpipe's Redis locks: the queue and execution locks that keep jobs of the
// same concurrency key from running at once, the slots that allow up to N of them, and the
// heartbeats that keep a running job's lock alive. It uses go-redsync (Redlock), through its public
// API only, over 1, 3 or 5 independent Redis nodes, and imports nothing else from jobpipe.
//
// These locks give mutual exclusion and speed, not the last word. The database is the final
// fence: every write after a claim checks the row's lock token, and a unique index over the
// running rows' (key, slot) refuses a second claim of a slot, whatever Redis says.
//
// # Queue and execution locks
//
// The dispatcher takes the queue lock of (kind, key, slot) with [Locker.TryQueueSlot] or
// [Locker.TryQueue] and hands the job to a worker (Config.QueueTTL covers that hand-off). The
// worker takes the execution lock of the same (kind, key, slot) with [Locker.TryExec], releases
// the queue lock, extends the execution lock while the handler runs ([Lock.Extend]; [ErrLost]
// means the job must stop and not be recorded as done) and releases it when the job ends, even
// when its context was cancelled. The keys are
//
//	<prefix>q:<kind>:<key>:<slot>    queue lock       e.g. jobpipe:lock:q:email:user-42:0
//	<prefix>x:<kind>:<key>:<slot>    execution lock   e.g. jobpipe:lock:x:email:user-42:0
//
// A kind may not contain ':'; a key longer than [MaxKeyLen] bytes, or starting with "sha256:",
// appears as "sha256:" and its SHA-256 in hex. A lock's value is Config.NodeName, ':' and 128
// random bits, so a key seen in Redis tells who holds it. A key with a running limit of N has
// slots 0 to N-1; TryExecSlot and TryQueueSlot try them in a fresh random order, skipping the
// slots the caller knows are busy.
//
// # One attempt, bounded calls
//
// Every call makes one attempt: a busy key returns [ErrTaken] at once, an outage [ErrUnavailable].
// Over several nodes an attempt can also fail with nobody winning (each node says yes to a
// different contender); that is safe.
//
// Every call is bounded by Config.CallTimeout, also when nodes are down or stalled ([NewClient]
// builds clients that apply a context's deadline to socket I/O). redsync's fail-fast returns as
// soon as a quorum has decided, so one stopped node of three costs nothing. A hook New adds to each
// client runs the commands to the other nodes on to their deadline, so that a lock and its
// extensions reach every node that answers, and keeps a lock's commands on each node in order, so
// that neither a failed attempt's clean-up nor a release overtakes its SET NX there.
//
// # Clean-up
//
// Wherever a failed acquire or a release may have left the lock's value (a node that did not
// answer, or that fail-fast did not wait for), the Locker sends its own compare-and-delete. A
// janitor retries it until the node answers, then sends it once more a short while later: a
// stalled node that resumes runs what was written to it meanwhile in no set order, so an old
// SET NX can land after the first delete. [Locker.Close] stops the janitor.
//
// # What a lock does not promise
//
// An extension never re-takes a lapsed lock: it returns ErrLost. [Lock.Until] is this process's
// estimate of the validity, not a guarantee: a Redis node restarted without persistence forgets
// its locks, and two single-node restarts in a row (a rolling restart, see TestRestartEmpty) let a
// second holder take a lock whose first holder's Until is still in the future. The first learns it
// at its next heartbeat; until then only the database's token refuses the stale holder's writes. A
// paused process can likewise outlive its lock without knowing. Hence the fence.
package execlock
