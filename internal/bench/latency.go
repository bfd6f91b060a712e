package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/internal/states"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// The latency scenario's targets (docs/benchmarks.md, "Scenarios").
const (
	latencyStartTarget = 20 * time.Millisecond
	latencyE2ETarget   = 50 * time.Millisecond
)

// Enqueue callers: goroutines that call dispatcher.Enqueue, one job per call, each with a connection
// of its own. An Enqueue is a round trip and a commit (a WAL flush with synchronous_commit on), which
// under load takes many times the interval between two jobs, so one caller alone falls behind the
// rate. latency runs one caller per callerRate jobs of the rate, so that each has many times a
// commit's time per call, from minCallers to maxCallers.
const (
	callerRate = 25
	minCallers = 2
	maxCallers = 32
)

// latencyCallers is how many callers share the enqueues at the given rate.
func latencyCallers(rate int) int {
	return min(maxCallers, max(minCallers, (rate+callerRate-1)/callerRate))
}

// minPacerTick bounds how often the pacer wakes at high rates.
const minPacerTick = 100 * time.Microsecond

// latencyJobs is how many jobs latency enqueues: rate per second over d, rounded down.
func latencyJobs(rate int, d time.Duration) int64 {
	r := int64(rate)
	return int64(d/time.Second)*r + int64(d%time.Second)*r/int64(time.Second)
}

// dueAt is when job n is due after the start of the schedule: n/rate seconds.
func dueAt(n int64, rate int) time.Duration {
	return time.Duration(n * int64(time.Second) / int64(rate))
}

// dueBy is how many of jobs have fallen due elapsed after the start: jobs 0 to dueBy-1. The count
// comes from the elapsed time, not from ticks counted, so a late tick releases every job that fell
// due meanwhile and the schedule never drifts.
func dueBy(elapsed time.Duration, rate int, jobs int64) int64 {
	if elapsed < 0 {
		return 0
	}
	return min(latencyJobs(rate, elapsed)+1, jobs)
}

// latencyWatch is when each job was enqueued, started and ended, in ns since start on the local
// monotonic clock; 0 until it happens. start is set before the dispatchers start, so that their
// handlers only ever read it; the schedule begins at paced.
type latencyWatch struct {
	start                          time.Time
	paced                          time.Duration
	called, returned, began, ended []atomic.Int64
	enqueued                       atomic.Int64
}

func newLatencyWatch(jobs int64) *latencyWatch {
	return &latencyWatch{start: time.Now(), called: make([]atomic.Int64, jobs), returned: make([]atomic.Int64, jobs),
		began: make([]atomic.Int64, jobs), ended: make([]atomic.Int64, jobs)}
}

// scheduled is when job n was due, in ns since start.
func (w *latencyWatch) scheduled(n int64, rate int) int64 { return int64(w.paced + dueAt(n, rate)) }

// now is the time since the start, at least 1 so that 0 stays "not yet".
func (w *latencyWatch) now() int64 { return max(1, int64(time.Since(w.start))) }

// between returns to[i] - from[i] for every job where both are set, and how many jobs lack either.
func between(from, to []atomic.Int64) (ds []time.Duration, missing int) {
	ds = make([]time.Duration, 0, len(from))
	for i := range from {
		a, b := from[i].Load(), to[i].Load()
		if a == 0 || b == 0 {
			missing++
			continue
		}
		ds = append(ds, time.Duration(b-a))
	}
	return ds, missing
}

// latencySummary is the distribution of one latency, in milliseconds.
type latencySummary struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// summarize sorts ds and returns its percentiles.
func summarize(ds []time.Duration) latencySummary {
	slices.Sort(ds)
	return latencySummary{Count: len(ds), P50: pctMs(ds, 50), P90: pctMs(ds, 90), P99: pctMs(ds, 99), Max: pctMs(ds, 100)}
}

func (l latencySummary) String() string {
	return fmt.Sprintf("%.2f / %.2f / %.2f / %.2f ms", l.P50, l.P90, l.P99, l.Max)
}

// runLatency enqueues Rate jobs per second for Duration, each with its own dispatcher.Enqueue call
// (latencyCallers callers, paced to a fixed schedule), while one dispatcher of Workers works them
// with a Handler-long handler. It measures per job enqueue-to-start (the Enqueue call to the
// handler's start, local clock) and end-to-end (created_at to processed_at, database clock), then
// drains the rest and accounts for every job.
func runLatency(ctx context.Context, s *session) error {
	o := s.opts
	jobs := latencyJobs(o.Rate, o.Duration)
	kind, err := createKind[plainJob](ctx, s, "bench_latency")
	if err != nil {
		return err
	}
	w := newLatencyWatch(jobs)
	var led ledger
	s.trace.reset()
	f, err := startTimedFleet(ctx, s, kind, "latency", w, &led, func(j *plainJob) int64 { return j.N })
	if err != nil {
		return err
	}
	defer f.stop(ctx)
	stop := progress(o.Log, o.Progress, "latency", func() (int64, int64) {
		p := f.processed()
		return p, w.enqueued.Load() - p
	})
	pool, err := s.producerPool(ctx)
	var window time.Duration
	if err == nil {
		window, err = enqueueAtRate(ctx, pool, o.Rate, kind, w, jobs, newPlainJob)
		// Open until the jobs are done, as an application's pool is.
		defer pool.Close()
	}
	if err == nil {
		err = s.waitProcessed(ctx, f, jobs)
	}
	stop()
	if err != nil {
		return err
	}
	if err := f.stop(ctx); err != nil {
		return err
	}
	acc, err := s.account(ctx, kind.Info().Table, &led, jobs, 0)
	if err != nil {
		return err
	}
	db, err := s.latencyTimes(ctx, kind, w)
	if err != nil {
		return err
	}
	s.recordLatency(latencyRun{jobs: jobs, window: window, w: w, db: db, stats: f.stats(), acc: acc})
	return nil
}

// startTimedFleet starts the dispatcher of latency and rate: Workers workers whose handler records
// job n (of the job's data) as begun in w and as run in led, sleeps Handler, and records it as ended.
func startTimedFleet[T any](ctx context.Context, s *session, kind *jobinfo.Kind[T], label string, w *latencyWatch, led *ledger,
	n func(*T) int64) (*fleet, error) {
	return s.startFleet(ctx, s.opts.Dispatchers[0], label, false, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[T]) error {
			n := n(&j.Data)
			w.began[n].CompareAndSwap(0, w.now())
			led.run(n)
			err := sleepCtx(ctx, s.opts.Handler)
			w.ended[n].CompareAndSwap(0, w.now())
			return err
		})
	})
}

// producerPool opens the enqueue callers' pool, a connection for each of latencyCallers(Rate)
// callers, and waits until all are open, so that the schedule never waits for a connection. Its
// statements are not the dispatchers', so the tracer is off.
func (s *session) producerPool(ctx context.Context) (*pgxpool.Pool, error) {
	callers := latencyCallers(s.opts.Rate)
	cfg := s.config(callers)
	cfg.ConnConfig.Tracer = nil
	cfg.MinConns = int32(callers)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "the producer's connections", time.Minute, pollEvery, func() (bool, error) {
		return pool.Stat().IdleConns() >= int32(callers), nil
	}); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// enqueueAtRate enqueues jobs 0 to jobs-1 (made by mk) on the schedule of the given rate: job n falls
// due n/rate after the start and is handed to the first free caller, one per connection of pool. It
// returns the time from the start until the last Enqueue returned.
func enqueueAtRate[T any](ctx context.Context, pool *pgxpool.Pool, rate int, kind *jobinfo.Kind[T], w *latencyWatch, jobs int64,
	mk func(n int64) T) (time.Duration, error) {
	callers := latencyCallers(rate)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	due := make(chan int64, min(jobs, 1<<16))
	paceStart := time.Now()
	w.paced = paceStart.Sub(w.start)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for n := range due {
				w.called[n].Store(w.now())
				_, err := dispatcher.Enqueue(ctx, pool, kind, mk(n))
				if err != nil {
					cancel(fmt.Errorf("enqueueing job %d: %w", n, err))
					return
				}
				w.returned[n].Store(w.now())
				w.enqueued.Add(1)
			}
		})
	}
	err := pace(ctx, paceStart, rate, jobs, due)
	close(due)
	wg.Wait()
	window := time.Since(paceStart)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return window, cause
	}
	if err != nil {
		return window, fmt.Errorf("interrupted while enqueueing: %w", err)
	}
	return window, nil
}

// pace sends 0 to jobs-1 to out on the schedule of dueBy, waking on a ticker of the interval between
// two jobs. Behind schedule (a stalled tick, a full channel), it sends every job already due at once.
func pace(ctx context.Context, start time.Time, rate int, jobs int64, out chan<- int64) error {
	t := time.NewTicker(max(time.Second/time.Duration(rate), minPacerTick))
	defer t.Stop()
	var next int64
	for {
		for due := dueBy(time.Since(start), rate, jobs); next < due; next++ {
			select {
			case out <- next:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		if next == jobs {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

// latencyDB is what the table says of each job, on the database's clock.
type latencyDB struct {
	claim, e2e []time.Duration // created_at to started_at, and to processed_at
	e2eLocal   []time.Duration // the Enqueue call (local clock) to processed_at (database clock)
}

// latencyTimes reads each processed job's times from the table: the claim's started_at and the
// finish's processed_at (both now() of their statement's transaction) against created_at (now() of
// the insert).
func (s *session) latencyTimes(ctx context.Context, kind *jobinfo.Kind[plainJob], w *latencyWatch) (latencyDB, error) {
	var db latencyDB
	rows, err := s.db.Query(ctx, `SELECT n, (extract(epoch FROM started_at - created_at) * 1e6)::bigint,
		(extract(epoch FROM processed_at - created_at) * 1e6)::bigint, processed_at
		FROM `+kind.Info().Table.Sanitize()+` WHERE `+states.Processed(""))
	if err != nil {
		return db, fmt.Errorf("reading the jobs' times: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n, claimUS, e2eUS int64
		var processed time.Time
		if err := rows.Scan(&n, &claimUS, &e2eUS, &processed); err != nil {
			return db, fmt.Errorf("reading the jobs' times: %w", err)
		}
		db.claim = append(db.claim, time.Duration(claimUS)*time.Microsecond)
		db.e2e = append(db.e2e, time.Duration(e2eUS)*time.Microsecond)
		if n >= 0 && n < int64(len(w.called)) {
			if c := w.called[n].Load(); c > 0 {
				db.e2eLocal = append(db.e2eLocal, processed.Sub(w.start.Add(time.Duration(c))))
			}
		}
	}
	return db, rows.Err()
}

// latencyRun is what runLatency measured, for its report.
type latencyRun struct {
	jobs   int64
	window time.Duration
	w      *latencyWatch
	db     latencyDB
	stats  dispatcher.Stats
	acc    accounting
}

func (s *session) recordLatency(m latencyRun) {
	o, r := s.opts, s.report
	startDs, missing := between(m.w.called, m.w.began)
	start := summarize(startDs)
	callDs, _ := between(m.w.called, m.w.returned)
	call := summarize(callDs)
	afterDs, _ := between(m.w.returned, m.w.began)
	after := summarize(afterDs)
	handlerDs, _ := between(m.w.called, m.w.ended)
	handler := summarize(handlerDs)
	lagDs := make([]time.Duration, 0, len(m.w.called))
	for n := range m.w.called {
		if c := m.w.called[n].Load(); c > 0 {
			lagDs = append(lagDs, max(0, time.Duration(c-m.w.scheduled(int64(n), o.Rate))))
		}
	}
	lag := summarize(lagDs)
	claim, e2e, e2eLocal := summarize(m.db.claim), summarize(m.db.e2e), summarize(m.db.e2eLocal)
	achieved := rate(m.jobs, m.window)
	startMet := start.Count > 0 && start.P99 <= ms(latencyStartTarget)
	e2eMet := e2e.Count > 0 && e2e.P99 <= ms(latencyE2ETarget)
	r.result("scenario", "latency")
	r.result("jobs", m.jobs)
	r.result("rate", o.Rate)
	r.result("rate_achieved", achieved)
	r.result("seconds", round(m.window.Seconds(), 2))
	r.result("workers", o.Workers)
	r.result("handler_ms", ms(o.Handler))
	r.result("start_p50_ms", start.P50)
	r.result("start_p90_ms", start.P90)
	r.result("start_p99_ms", start.P99)
	r.result("start_max_ms", start.Max)
	r.result("e2e_p50_ms", e2e.P50)
	r.result("e2e_p90_ms", e2e.P90)
	r.result("e2e_p99_ms", e2e.P99)
	r.result("e2e_max_ms", e2e.Max)
	r.result("enqueue_p99_ms", call.P99)
	r.result("targets_met", startMet && e2eMet)
	m.acc.resultPairs(r)
	r.Details["dispatcher_stats"] = m.stats
	r.Details["latency"] = map[string]latencySummary{"enqueue_call": call, "producer_lag": lag, "start": start, "returned_to_start": after,
		"handler_end": handler, "claim_db": claim, "e2e_db": e2e, "e2e_call_to_processed_at": e2eLocal}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "missed"
	}
	r.table(Table{Title: "latency (p50 / p90 / p99 / max)", Header: []string{"measure", "value", "target"}, Rows: [][]string{
		{"jobs, each its own dispatcher.Enqueue call", fmt.Sprintf("%d over %.1f s by %d callers", m.jobs, m.window.Seconds(), latencyCallers(o.Rate)), ""},
		{"rate asked / achieved", fmt.Sprintf("%d / %.0f jobs/s", o.Rate, achieved), ""},
		{"producer lag (job's scheduled time -> Enqueue called)", lag.String(), "small: else the rate was not held"},
		{"Enqueue call (called -> returned)", call.String(), ""},
		{"enqueue -> start (Enqueue called -> handler began, local clock)", start.String(),
			fmt.Sprintf("p99 <= %v: %s", latencyStartTarget, met(startMet))},
		{"Enqueue returned -> handler began (local clock)", after.String(), "negative: began before the reply arrived"},
		{"enqueue -> claim (created_at -> started_at, database clock)", claim.String(), ""},
		{"enqueue -> handler returned (local clock)", handler.String(), fmt.Sprintf("includes the %v handler", o.Handler)},
		{"end-to-end (created_at -> processed_at, database clock)", e2e.String(), fmt.Sprintf("p99 <= %v: %s", latencyE2ETarget, met(e2eMet))},
		{"Enqueue called (local) -> processed_at (database; one clock on one host)", e2eLocal.String(), ""},
		{"jobs whose handler never began", format(missing), "0"},
		{"claimed / processed / stale finishes", fmt.Sprintf("%d / %d / %d", m.stats.Claimed, m.stats.Processed, m.stats.StaleFinishes), ""},
	}})
	m.acc.record(r)
	s.statements("dispatchers' statements during the run (client-side time)")
}
