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
// the queue lock, extends the execution lock while the handler runs ([Lock.Extend],
// [Lock.KeepAlive]; [ErrLost] means the job must stop and not be recorded as done) and releases it
// when the job ends, even when its context was cancelled. The keys are
//
//	<prefix>q:<kind>:<key>:<slot>    queue lock       e.g. jobpipe:lock:q:email:user-42:0
//	<prefix>x:<kind>:<key>:<slot>    execution lock   e.g. jobpipe:lock:x:email:user-42:0
//
// A kind may not contain ':'; a key longer than [MaxKeyLen] bytes, or starting with "sha256:",
// appears as "sha256:" and its SHA-256 in hex. A lock's value is Config.NodeName, ':' and 128
// random bits, made by the Locker (redsync's WithGenValueFunc), so a key seen in Redis tells who
// holds it. A key with a running limit of N has slots 0 to N-1; TryExecSlot and TryQueueSlot try
// them in a fresh random order, skipping the slots the caller knows are busy.
//
// # One attempt, bounded calls
//
// Every call makes one attempt (redsync's WithTries(1)): a busy key returns [ErrTaken] at once,
// an outage [ErrUnavailable]. Under a thundering herd a Redlock attempt over several nodes can
// also fail with nobody winning (each node says yes to a different contender); that is safe.
//
// Every call is bounded by Config.CallTimeout, also when nodes are down or stalled: the calls'
// contexts have that deadline, and [NewClient] builds clients that apply it to socket I/O
// (ContextTimeoutEnabled, which [New] requires). redsync's WithFailFast returns as soon as a
// quorum has decided, so one stopped node of three costs nothing. The commands to the other nodes
// are then still on their way. A hook New adds to each client runs them to their deadline, since
// go-redis would drop those not yet on a connection once fail-fast cancels the round: so a lock and
// its extensions reach every node that answers. The hook also keeps a lock's commands on each node
// in order, so that neither a failed attempt's clean-up nor a release overtakes its SET NX there.
//
// # Clean-up
//
// After an acquire that failed, the Locker sends its own compare-and-delete (a Lua script of its
// own: delete the key only if it holds the lock's value) to every node that did not refuse it;
// after a release, to the nodes that did not answer it (or that fail-fast did not wait for, when
// it failed) and to those that never answered the acquire's SET NX. A janitor retries it until
// the node answers, then sends it once more a short while later: a stalled node that resumes runs
// what was written to it meanwhile in no set order, so an old SET NX can land after the first
// delete. [Locker.Close] stops the janitor.
//
// # What a lock does not promise
//
// An extension never re-takes a lapsed lock (redsync's WithSetNXOnExtend is not used): it returns
// ErrLost. [Lock.Until] is this process's estimate of the validity, not a guarantee: a Redis node
// restarted without persistence forgets its locks, and two single-node restarts in a row (a
// rolling restart, see TestRestartEmpty) let a second holder take a lock whose first holder's
// Until is still in the future. The first learns it at its next heartbeat; until then only the
// database's token refuses the stale holder's writes. A paused process can likewise outlive its
// lock without knowing. Hence the fence.
package execlock
