// Package backoff owns jobpipe's retry delay policies: how long a failed job
// waits before its next attempt. A policy is a pure function of the number of
// attempts made so far (see [Policy]); it does not decide how many attempts a
// job gets, which is set by the job kind, nor what happens when they run out.
// The package imports nothing else from jobpipe.
//
// Policies: [Exponential] (growing, capped, jittered), [Constant] (a fixed
// delay) and [Func] (any function). [Total] sums the delays of a [Bounded]
// policy, to tell how long a failing job keeps being retried.
//
// # Default policy
//
// [Default] is an [Exponential] with base 1s, factor 2, cap 6h and
// [EqualJitter]: after attempt n the job waits a random time in [d/2, d],
// where d = min(6h, 1s × 2^(n-1)). With the default of 25 max attempts, so 24
// delays, the waits are:
//
//	attempt  1: 500ms to 1s
//	attempt  5: 8s to 16s
//	attempt 10: 4m16s to 8m32s
//	attempt 15: 2h16m32s to 4h33m4s
//	attempt 16 onward: 3h0m0s to 6h0m0s (the cap)
//	all 24 delays: 31h33m3.5s to 63h6m7s (about 1.3 to 2.6 days)
//
// and 47h19m35.25s on average. A test recomputes every figure in this comment
// from the code, so they cannot drift apart.
//
// # Why this default
//
// Jobs fail for two kinds of reasons. Transient faults (a serialization
// failure, a dropped connection, a timeout) are gone within seconds;
// doubling from 1s gives them four retries in the first 7.5s to 15s. Outages
// and bugs last hours and end with a fix or a deploy; against those, the delay
// soon grows out of the way (minutes apart by attempt 10) and the cap bounds
// how long a job sits idle after the fix: at most 6h0m0s.
//
// River, for comparison, waits attempt^4 seconds ±10% with 25 attempts: its
// 24 delays sum to about 489h43m40s (20.4 days), but with no practical cap
// (only time.Duration's overflow limit) the last one alone is 92h9m36s, so a
// job can wait almost four days after its cause was fixed.
//
// The cap also sets the horizon, because most of the 24 delays are at the cap.
// A 1h cap would fail a job for good after only 6h34m7.5s to 13h8m15s of
// failures: an outage that starts in the evening could use up every attempt
// before anyone is awake to fix it. With 6h a job outlasts at least 31h33m3.5s
// of failures, more than a night and the working day after it. Kinds that
// must outlast longer outages, a weekend say, raise their max attempts: each
// extra attempt adds 3h0m0s to 6h0m0s.
//
// Jitter matters because failures come in herds: when a dependency goes down,
// every job that uses it fails together and, without jitter, would be retried
// together. River's ±10% spreads a herd over a fifth of the delay; equal
// jitter spreads it over half and keeps a floor at d/2, so the horizon above
// can shrink by at most half. [FullJitter] spreads a herd further, but its
// floor is zero, and so would be the shortest possible horizon.
package backoff
