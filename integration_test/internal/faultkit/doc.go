// Package faultkit is what the multi-process and fault tests of integration_test are made of: a
// world to run jobs in, worker processes to run them, faults to inject, and the checks and figures
// that say what held.
//
// A test reads as three phases:
//
//   - arrange: a World (a schema with jobpipe's tables, the keyed kind KeyedKind, the ledger of
//     handler calls and the lock nodes), worker processes started with StartWorker from
//     WorkerSettings (the test binary re-executed: TestMain hands such a process to RunWorker), and
//     the kinds they work besides the keyed one (PlainJob, InputJob, ProbeJob, TickJob, the flaky
//     kind);
//   - inject: signals to the workers (Worker.Kill), servers stopped or restarted (testenv), while
//     the workers run;
//   - assert: the ledger (World.Ledger, Call), the audit of every row change (InstallAudit,
//     CheckAudit), the per-key counts (World.CheckConc) and claim order (World.CheckOrder), a clean
//     shutdown (Terminate, World.CheckQuiet), and the scenario's figures (ReportFigures).
//
// Every process a test starts is killed when the test ends, passed or failed; Reserve keeps the
// package's tests within what the shared PostgreSQL server can take.
package faultkit
