// Package faultkit is what the multi-process and fault tests of integration_test are made of: a
// world to run jobs in, worker processes to run them, loads to offer, faults to inject, and the
// checks and figures that say what held. A fault scenario reads as three steps, each made of these
// parts.
//
// Arrange:
//   - a World: a schema with jobpipe's tables, the keyed kind (KeyedKind, KeyedJob), the ledger
//     of handler calls (World.Ledger, Call) and the lock nodes; RedisWorld adds Redis nodes of its
//     own and the plain and probe kinds (RedisWorldSpec), PostgresWorld a private PostgreSQL
//     cluster (PostgresOptions);
//   - worker processes: StartWorker from WorkerSettings (the test binary re-executed: TestMain
//     hands such a process to RunWorker), WaitReady; Leases and ShortJobs set their timings, and
//     the settings name the kinds they work besides the keyed one (PlainJob, InputJob, TickJob,
//     the flaky kind, the probes); AppNames tell their statements apart;
//   - a steady offered load: StartSteadyLoad with KeyedJobs or PlainJobs, RedisWorld.StartLoad,
//     PostgresWorld.StartLoad;
//   - the logs the checks read: InstallAudit (every row change), InstallWriteLog (every UPDATE
//     statement and the rows it changed), InstallLeaderLog, World.InstallOrderCheck.
//
// Inject: Worker.Kill, Pause, Signal, StopInScheduleRound; Redis nodes killed, stopped and
// restarted (testenv.RedisNode); PostgresWorld.Outage and the cluster's restarts; network links
// (StartLink). Measure around it: Measure and Window, RedisWorld.RunPhases and Phases,
// PostgresWorld.MeasureRates, MeasureCalls.
//
// Assert: CheckAudit, CheckLostAndDuplicates, CheckKeyHolders, World.CheckOrder,
// AttemptsNotOnePlusRescues, RedisWorld.Finish and CheckJobs, PostgresWorld.End and its Verdict,
// World.CheckConc and World.CheckDoneOnce; a clean shutdown (Terminate, World.CheckQuiet); and the
// scenario's figures (ReportFigures), appended to the report `make test-faults` prints.
//
// Every process a test starts is killed when the test ends, passed or failed; Reserve keeps the
// package's tests within what the shared PostgreSQL server can take. SkipUnlessFaultSuite keeps
// the fault scenarios out of ordinary runs.
package faultkit
