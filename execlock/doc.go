// Package execlock owns jobpipe's Redis locks: the queue and execution locks that keep jobs of the
// same concurrency key from running at once, the slots that allow up to N of them, and the
// heartbeats that keep a running job's lock alive. It uses go-redsync (Redlock) over 1, 3 or 5
// independent Redis nodes and imports nothing else from jobpipe.
//
// These locks give mutual exclusion and speed, not the last word. The database is the final
// fence: every write after a claim checks the row's lock token, and a unique index over the
// running rows' (key, slot) refuses a second claim of a slot, so that a key never runs more jobs than
// its limit and a stale holder's writes change nothing, whatever Redis says.
// Redis locks can fail in ways only that fence catches; see "What a lock does not promise".
//
// # Queue and execution locks
//
// For each job of a kind with a concurrency key:
//
//  1. The dispatcher takes the queue lock of (kind, key, slot) with [Locker.TryQueueSlot] (or
//     [Locker.TryQueue] for a known slot) and hands the job to a worker. Config.QueueTTL (10 s)
//     only needs to cover that hand-off.
//  2. The worker takes the execution lock of the same (kind, key, slot) with [Locker.TryExec],
//     then releases the queue lock, so the next job of the key can be dispatched.
//  3. While the handler runs, heartbeats extend the execution lock ([Lock.Extend], or
//     [Lock.KeepAlive] every ExecTTL/3). An extension that fails returns [ErrLost]: the job must
//     stop and must not be recorded as done.
//  4. When the job ends the worker releases the execution lock ([Lock.Release]), even when its
//     context was cancelled.
//
// The two locks live under different keys, so a queue lock can be taken while the key's job
// runs; only the execution lock keeps a second job from running:
//
//	<prefix>q:<kind>:<key>:<slot>    queue lock       e.g. jobpipe:lock:q:email:user-42:0
//	<prefix>x:<kind>:<key>:<slot>    execution lock   e.g. jobpipe:lock:x:email:user-42:0
//
// A kind may not contain ':'; a key may hold any bytes (it ends at the last ':'). A key longer
// than [MaxKeyLen] (128) bytes, or starting with "sha256:", appears as "sha256:" and its SHA-256
// in hex, so lock keys stay short and two different keys never share a lock. The lock's value is
// Config.NodeName, ':' and 128 random bits, so a key seen in Redis tells who holds it.
//
// # Slots
//
// A key with a running limit of N has slots 0 to N-1 and a job holds one of them. TryExecSlot and
// TryQueueSlot try the slots in a random order (a fresh permutation per call) and return the first
// lock they get, so that dispatchers do not all queue up on slot 0. Slots the caller knows are
// busy (the slots of the key's running rows) are skipped. Each slot found taken counts as a
// failed attempt: [Lock.FailedAttempts] per call and [Stats].Taken in all.
//
// # One attempt, no waiting
//
// Every call makes one attempt (redsync's WithTries(1)) and fails fast: a busy key returns
// [ErrTaken] at once. Waiting or retrying would only hammer Redis for a key that is busy for as
// long as its job runs; the dispatcher tries again when a job of the key ends or on its next pass,
// and it does not even try keys it knows are full. Errors tell contention ([ErrTaken]) from an
// outage ([ErrUnavailable]: a quorum of nodes did not answer) and from the caller's context.
//
// Under a thundering herd, a Redlock attempt over several nodes can also fail with nobody winning:
// each node says yes to a different contender and none has a quorum (TestTryExecRace shows
// it). That is safe; the next attempts, spread out in time, find a winner within milliseconds.
//
// # Timeouts and the Redis clients
//
// Every call is bounded by Config.CallTimeout (1 s), also when nodes are down or stalled, and the
// clients must let it be. By default go-redis does not apply a context's deadline to socket reads
// and writes: it waits for its own read timeout (5 s), so one stopped node stalls lock calls for
// seconds, and an extension given a 500 ms context still takes 5 s. [NewClient] builds clients
// that honour the context (ContextTimeoutEnabled), with 500 ms dial, read, write and pool timeouts
// and one retry instead of three, and [New] rejects a client without ContextTimeoutEnabled.
// NewClient also routes go-redis's process-wide logger, once, to slog.Default() at Debug level:
// its stderr logger prints a line per failed dial to a node that is down.
// redsync's fail-fast mode answers as soon as a quorum has decided instead of waiting for the
// slowest node: with one of three nodes stopped, calls take a millisecond, not a timeout.
//
// Fail-fast alone has costs, which this package removes (gate.go): redsync cancels the commands
// still going to the other nodes, so a lock would sit on a bare quorum (one more lost node would
// lose it) and the clean-up of a failed attempt could miss a node, leaving a partial lock that
// nobody holds for a whole TTL. Here those commands finish in the background, in order per node,
// and deletes that cannot reach a node (down, or stalled and about to run an old SET NX when it
// resumes) are retried by a janitor until it answers; [Locker.Close] stops it.
//
// Measured on one machine (TestMinorityDown, TestMajorityDown, TestStalledNode): with one of three
// nodes killed or stopped, acquire, extend and release take about a millisecond; with two of three
// killed, an acquire reports ErrUnavailable in tens of milliseconds; with two of three stopped, in
// CallTimeout (1 s), and an extension reports ErrLost in the read timeout (500 ms). Locks work
// again within milliseconds of the nodes' return.
//
// # Pipelining
//
// A dispatcher takes dozens of queue locks in one claim pass and its workers take and release
// execution locks at the same time: four commands per keyed job and node. By default the Locker
// sends each node's commands in pipelines, one pipeline on the wire at a time: a command that
// arrives while a pipeline is on the wire leaves with the next, in one write and one read, and a
// lone command goes out at once. The commands and their order per lock are the same as without
// it, so Redlock's quorum, validity and clean-up are unchanged; the cost per command falls
// (docs/benchmarks.md, "Lock pipelining"). A pipelined command outlives its call's deadline up to the client's read or
// write timeouts, waiting behind the pipeline ahead of it, in the background like the commands
// above; a delete of the same lock waits for it before going to the janitor.
// Config.DisablePipelining sends each command on a round trip of its own.
//
// The pipelines are the Locker's own, sent with go-redis's Pipeline (pipeliner.go), so client
// hooks see them as ordinary pipelines. The goroutine redsync starts for a node queues the command
// and waits for its answer; only when the call's round ends first does one of the Locker's
// goroutines take over the wait (queued.go).
//
// When a stopped node resumes, it runs what was written to it meanwhile, and not in the order it
// was written: connections it had already accepted are read before those dialled during the stop,
// and a large pipeline is read in pieces between other clients'. An old SET NX can so land after
// the delete meant to remove it. So a delete that follows a SET NX left without an answer goes to
// the janitor even when it succeeded, and the janitor sends each of its deletes once more, a
// quarter of CallTimeout after the first succeeded (TestStalledNodeUnderLoadLeavesNoKey: without
// these, 7 of 10 pipelined runs left 12 to 22 keys that nobody held).
//
// # What a lock does not promise
//
// redsync never re-takes a lapsed lock here: its WithSetNXOnExtend option would, silently, so it
// is not used, and an extension of a lock whose value is gone returns ErrLost. [Lock.Until] is
// this process's estimate of the validity (start of the call + TTL − duration − 1% drift). It is
// not a guarantee: a Redis node restarted without persistence forgets the locks it held, and a
// second holder can then take a lock whose first holder's Until is still in the future. Two
// single-node restarts in a row are enough (a rolling restart, no majority ever down; see
// TestRestartEmpty). The first holder learns it at its next heartbeat, up to ExecTTL/3 later;
// until then both run, and only the database's token can refuse the stale one's writes. A paused
// process (GC, SIGSTOP) can likewise outlive its lock without knowing. Hence the fence.
package execlock
