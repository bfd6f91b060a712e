package bench

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
)

// ratePayloadBytes is the size of each rate job's payload: a small application's job, not an empty one.
const ratePayloadBytes = 256

// ratePayload is every rate job's payload. Below PostgreSQL's TOAST threshold (about 2 kB), its
// content does not change what storing it costs.
var ratePayload = strings.Repeat("0123456789abcdef", ratePayloadBytes/16)

// rateSettle is how long rate waits, with everything connected and idle, before its window starts:
// a backend publishes its transaction counts about once a second, so the setup's are published by
// then and not counted in the window.
const rateSettle = 1100 * time.Millisecond

// rateJob is the job of rate: N is its index in the ledger, Payload ratePayloadBytes of data.
type rateJob struct {
	N       int64  `jobpipe:"n"`
	Payload string `jobpipe:"payload"`
}

func newRateJob(n int64) rateJob { return rateJob{N: n, Payload: ratePayload} }

// runRate measures what a job costs at a fixed, moderate load. It offers Rate jobs per second for
// Duration, each its own dispatcher.Enqueue call on latency's schedule and callers, to one dispatcher
// of Workers workers with a Handler-long handler. Over the window from the first job due to the last
// one processed, it measures the CPU time of this process, of the PostgreSQL backends serving the
// run and of the whole machine (cpuMeter), and the database's transactions; it divides each by the
// jobs. It also reports enqueue-to-start as latency does, and accounts for every job.
func runRate(ctx context.Context, s *session) error {
	o := s.opts
	jobs := latencyJobs(o.Rate, o.Duration)
	// The meter first: a server whose backends cannot be read fails the run before it starts.
	meter, err := newCPUMeter(ctx, o.DB.ConnConfig, s.app)
	if err != nil {
		return err
	}
	defer meter.close(ctx)
	kind, err := createKind[rateJob](ctx, s, "bench_rate")
	if err != nil {
		return err
	}
	// The bookkeeping pool's backends exit, which publishes the setup's transaction counts now.
	s.db.Reset()
	w := newLatencyWatch(jobs)
	var led ledger
	s.trace.reset()
	f, err := startTimedFleet(ctx, s, kind, "rate", w, &led, func(j *rateJob) int64 { return j.N })
	if err != nil {
		return err
	}
	defer f.stop(ctx)
	pool, err := s.producerPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := sleepCtx(ctx, rateSettle); err != nil {
		return err
	}
	if err := meter.begin(ctx); err != nil {
		return err
	}
	stop := progress(o.Log, o.Progress, "rate", func() (int64, int64) {
		p := f.processed()
		return p, w.enqueued.Load() - p
	})
	enqueueWindow, err := enqueueAtRate(ctx, pool, o.Rate, kind, w, jobs, newRateJob)
	if err == nil {
		err = s.waitProcessed(ctx, f, jobs)
	}
	stop()
	if err != nil {
		return err
	}
	cpu, err := meter.end(ctx)
	if err != nil {
		return err
	}
	pool.Close()
	if err := f.stop(ctx); err != nil {
		return err
	}
	if cpu.Xacts, err = meter.transactions(ctx); err != nil {
		return err
	}
	acc, err := s.account(ctx, kind.Info().Table, &led, jobs, 0)
	if err != nil {
		return err
	}
	s.recordRate(rateRun{jobs: jobs, enqueueWindow: enqueueWindow, w: w, cpu: cpu, stats: f.stats(), acc: acc})
	return nil
}

// rateRun is what runRate measured, for its report.
type rateRun struct {
	jobs          int64
	enqueueWindow time.Duration
	w             *latencyWatch
	cpu           cpuWindow
	stats         dispatcher.Stats
	acc           accounting
}

// perJob is d per job in microseconds, with one decimal.
func perJob(d time.Duration, jobs int64) float64 {
	if jobs <= 0 {
		return 0
	}
	return round(float64(d)/float64(time.Microsecond)/float64(jobs), 1)
}

// share is part of whole in percent, with one decimal.
func share(part, whole time.Duration) float64 {
	if whole <= 0 {
		return 0
	}
	return round(100*float64(part)/float64(whole), 1)
}

func (s *session) recordRate(m rateRun) {
	o, r, c := s.opts, s.report, m.cpu
	startDs, missing := between(m.w.called, m.w.began)
	start := summarize(startDs)
	lagDs := make([]time.Duration, 0, len(m.w.called))
	for n := range m.w.called {
		if at := m.w.called[n].Load(); at > 0 {
			lagDs = append(lagDs, max(0, time.Duration(at-m.w.scheduled(int64(n), o.Rate))))
		}
	}
	lag := summarize(lagDs)
	// Each Enqueue call is one transaction: an INSERT on a pool commits on its own. The wake-up
	// notifications that concurrent calls share are transactions of their own, and stay in the rest.
	enqueueXacts := m.acc.Jobs
	xactsPerJob := round(float64(c.Xacts)/float64(max(m.jobs, 1)), 2)
	restPerJob := round(float64(c.Xacts-enqueueXacts)/float64(max(m.jobs, 1)), 2)
	r.result("scenario", "rate")
	r.result("jobs", m.jobs)
	r.result("rate", o.Rate)
	r.result("rate_achieved", rate(m.jobs, m.enqueueWindow))
	r.result("seconds", round(c.Elapsed.Seconds(), 2))
	r.result("jobs_per_s", rate(m.jobs, c.Elapsed))
	r.result("workers", o.Workers)
	r.result("handler_ms", ms(o.Handler))
	r.result("start_p50_ms", start.P50)
	r.result("start_p99_ms", start.P99)
	r.result("worker_cpu_us_per_job", perJob(c.Self, m.jobs))
	r.result("pg_cpu_us_per_job", perJob(c.PG, m.jobs))
	r.result("machine_cpu_us_per_job", perJob(c.Machine, m.jobs))
	r.result("xacts_per_job", xactsPerJob)
	r.result("dispatch_xacts_per_job", restPerJob)
	m.acc.resultPairs(r)
	cores := time.Duration(runtime.NumCPU())
	r.Details["dispatcher_stats"] = m.stats
	r.Details["latency"] = map[string]latencySummary{"producer_lag": lag, "start": start}
	r.Details["cpu"] = map[string]any{"window_s": c.Elapsed.Seconds(), "process_s": c.Self.Seconds(), "pg_backends_s": c.PG.Seconds(),
		"machine_busy_s": c.Machine.Seconds(), "machine_all_s": c.MachineAll.Seconds(), "pg_backends": c.Backends,
		"pg_backends_came": c.Came, "pg_backends_went": c.Went, "other_clients_of_database": c.Others,
		"xacts": c.Xacts, "enqueue_xacts": enqueueXacts}
	others := "none"
	if c.Others > 0 {
		others = fmt.Sprintf("up to %d: their transactions, if any, are counted too", c.Others)
	}
	r.table(Table{Title: "rate: what a job costs (window: first job due -> last job processed)", Header: []string{"measure", "value", "note"}, Rows: [][]string{
		{"jobs, each its own dispatcher.Enqueue call", fmt.Sprintf("%d by %d callers, %d-byte payload", m.jobs, latencyCallers(o.Rate), ratePayloadBytes), ""},
		{"rate asked / achieved", fmt.Sprintf("%d / %.0f jobs/s", o.Rate, rate(m.jobs, m.enqueueWindow)), ""},
		{"window", fmt.Sprintf("%.2f s", c.Elapsed.Seconds()), ""},
		{"producer lag (job's scheduled time -> Enqueue called)", lag.String(), "small: else the rate was not held"},
		{"enqueue -> start (Enqueue called -> handler began, local clock)", start.String(), "p50 / p90 / p99 / max"},
		{"this process's CPU (dispatcher, enqueue callers, bench)", cpuCell(c.Self, m.jobs),
			fmt.Sprintf("%.1f%% of one core", share(c.Self, c.Elapsed))},
		{"PostgreSQL backends' CPU (the run's connections)", cpuCell(c.PG, m.jobs),
			fmt.Sprintf("%d backends; %d connected, %d disconnected during the window", c.Backends, c.Came, c.Went)},
		{"machine's CPU (every process, busy time)", cpuCell(c.Machine, m.jobs),
			fmt.Sprintf("%.1f%% of %d cores busy", share(c.Machine, c.Elapsed*cores), runtime.NumCPU())},
		{"database's transactions", fmt.Sprintf("%d = %.2f per job", c.Xacts, xactsPerJob), "the Enqueue calls' included"},
		{"  less one per Enqueue call", fmt.Sprintf("%d = %.2f per job", c.Xacts-enqueueXacts, restPerJob), "claims, finishes, polls, notifications"},
		{"other clients of the database", others, ""},
		{"jobs whose handler never began", format(missing), "0"},
		{"claimed / processed / stale finishes", fmt.Sprintf("%d / %d / %d", m.stats.Claimed, m.stats.Processed, m.stats.StaleFinishes), ""},
	}})
	m.acc.record(r)
	s.statements("dispatchers' statements during the run (client-side time)")
}
