// Package bench is the engine of `jobpipe bench`: the scenarios of docs/benchmarks.md (drain, steady,
// unique, slots, fair, herd, select, latency, rate, memory), each run against real PostgreSQL and
// Redis servers in a schema of its own.
//
// A scenario creates its kinds through the public API only (jobinfo.Define, TableSpec.CreateSQL,
// dispatcher.EnqueueMany, dispatcher.New/Register/Start), so what it measures is what an application
// gets. Every scenario checks its own accounting with a ledger that counts handler runs per job, and
// against the table at the end: a job run twice is a duplicate, a job never run or not processed is
// lost, a job started before its process_after is early. The scenarios of keyed kinds also watch each
// key's concurrency from inside the handlers (slotWatch): it must never exceed the key's limit. A
// Report carries the measurements, the accounting and the failures; the command line prints it as a
// table and one RESULT line.
//
// The dispatchers' pools carry a pgx tracer that times each statement the library sends, and the
// Redis clients a hook that counts lock commands, so a report says where the time went without
// pg_stat_statements.
package bench
