package bench

// plainJob is the job of drain, steady and herd: no unique fields and no key, so it is enqueued with
// COPY and never touches Redis. N is the job's index in the run's ledger.
type plainJob struct {
	N int64 `jobpipe:"n"`
}

// keyedJob is the job of unique and select: K is the concurrency key (unique while executing, the
// default KeyLimit of 1), Seq its position within the key. It has no unique fields, so EnqueueMany
// still uses COPY.
type keyedJob struct {
	K   int64 `jobpipe:"k,key"`
	Seq int64 `jobpipe:"seq"`
	N   int64 `jobpipe:"n"`
}

// keyedJobFor spreads job n over keys round-robin: job n is the (n/keys)-th of key n%keys, so ids
// increase with Seq within each key.
func keyedJobFor(n, keys int64) keyedJob { return keyedJob{K: n % keys, Seq: n / keys, N: n} }

// slotJob is the job of slots: K is the concurrency key (KeyLimit slots per key) and SleepUS how long
// its handler sleeps in microseconds, decided at enqueue (see slowJob), so the table says which jobs
// were slow.
type slotJob struct {
	K       int64 `jobpipe:"k,key"`
	N       int64 `jobpipe:"n"`
	SleepUS int64 `jobpipe:"sleep_us"`
}

// fairJob is the job of fair: K is "big" for the big key's backlog, small-<i> for the small keys.
type fairJob struct {
	K string `jobpipe:"k,key"`
	N int64  `jobpipe:"n"`
}
