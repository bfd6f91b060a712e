package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

// rate is jobpipe's rate scenario on River (internal/bench/rate.go and latency.go): the same load,
// offered the same way, measured the same way. The schedule, the callers and the measures below
// mirror jobpipe's, so that the two RESULT lines compare.

// Insert callers: jobpipe's latency and rate run one caller for each rateCallerRate of the rate, from
// minCallers to maxCallers, each with a connection of its own: an insert is a round trip and a
// commit, which under load takes many times the interval between two jobs.
const (
	rateCallerRate = 25
	minCallers     = 2
	maxCallers     = 32
	minPacerTick   = 100 * time.Microsecond
)

// ratePayloadBytes is the size of each job's payload, as jobpipe's rate sends.
const ratePayloadBytes = 256

var ratePayload = strings.Repeat("0123456789abcdef", ratePayloadBytes/16)

// rateSettle is how long rate waits, with everything connected and idle, before its window starts:
// a backend publishes its transaction counts about once a second, so the setup's are published by
// then and not counted in the window.
const rateSettle = 1100 * time.Millisecond

// rateCallers is how many callers share the inserts at the given rate.
func rateCallers(rate int) int {
	return min(maxCallers, max(minCallers, (rate+rateCallerRate-1)/rateCallerRate))
}

// rateJobs is how many jobs rate inserts: rate per second over d, rounded down.
func rateJobs(rate int, d time.Duration) int64 {
	r := int64(rate)
	return int64(d/time.Second)*r + int64(d%time.Second)*r/int64(time.Second)
}

// dueBy is how many of jobs have fallen due elapsed after the start, from the elapsed time rather
// than ticks counted, so that a late tick releases every job due meanwhile and the schedule never
// drifts.
func dueBy(elapsed time.Duration, rate int, jobs int64) int64 {
	if elapsed < 0 {
		return 0
	}
	return min(rateJobs(rate, elapsed)+1, jobs)
}

// pace sends 0 to jobs-1 to out on the schedule of dueBy, waking on a ticker of the interval between
// two jobs. Behind schedule, it sends every job already due at once.
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

// latencyWatch is when each job's insert was called and when its worker began, in ns since start on
// the local monotonic clock; 0 until it happens. The schedule begins at paced.
type latencyWatch struct {
	start         time.Time
	paced         time.Duration
	called, began []atomic.Int64
	inserted      atomic.Int64
}

func newLatencyWatch(jobs int64) *latencyWatch {
	return &latencyWatch{start: time.Now(), called: make([]atomic.Int64, jobs), began: make([]atomic.Int64, jobs)}
}

// now is the time since the start, at least 1 so that 0 stays "not yet".
func (w *latencyWatch) now() int64 { return max(1, int64(time.Since(w.start))) }

// between returns to[i] - from[i] for every job where both are set, and how many lack either.
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

// pctMs is the p-th percentile of sorted in milliseconds with two decimals, as jobpipe computes it.
func pctMs(sorted []time.Duration, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p+99)/100 - 1
	d := sorted[max(0, min(i, len(sorted)-1))]
	return round(float64(d)/float64(time.Millisecond), 2)
}

// rateArgs is the job of rate: N is its index in the ledger.
type rateArgs struct {
	N       int64  `json:"n"`
	Payload string `json:"payload"`
}

// Kind is the River job kind.
func (rateArgs) Kind() string { return "bench_rate" }

// timedWorker is rate's worker: it records the job's start and run, then sleeps --handler.
type timedWorker struct {
	river.WorkerDefaults[rateArgs]
	s *session
}

// Work records the start and the run, and sleeps.
func (w *timedWorker) Work(ctx context.Context, j *river.Job[rateArgs]) error {
	n := j.Args.N
	w.s.watch.began[n].CompareAndSwap(0, w.s.watch.now())
	w.s.led.run(n)
	t := time.NewTimer(w.s.opts.handler)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// runRate offers --rate jobs per second for --duration, each its own InsertTx and commit, to the
// client, and measures what a job costs over the window from the first job due to the last completed.
func (s *session) runRate(ctx context.Context) error {
	o, w := s.opts, s.watch
	jobs := int64(len(w.called))
	// The meter first: a server whose backends cannot be read fails the run before it starts.
	meter, err := newCPUMeter(ctx, s.cfg.ConnConfig, s.app)
	if err != nil {
		return err
	}
	defer meter.close(ctx)
	// The pool's backends exit, which publishes the setup's transaction counts now.
	s.pool.Reset()
	if err := s.start(ctx); err != nil {
		return err
	}
	producer, err := s.producerPool(ctx)
	if err != nil {
		return err
	}
	defer producer.Close()
	time.Sleep(rateSettle)
	if err := meter.begin(ctx); err != nil {
		return err
	}
	stop := progress(s.log, o.progress, "rate", func() (int64, int64) {
		c := s.completed.Load()
		return c, w.inserted.Load() - c
	})
	insertWindow, err := s.insertAtRate(ctx, producer, jobs)
	if err == nil {
		err = s.waitCompleted(ctx, jobs)
	}
	stop()
	if err != nil {
		return err
	}
	cpu, err := meter.end(ctx)
	if err != nil {
		return err
	}
	producer.Close()
	if err := s.stop(ctx); err != nil {
		return err
	}
	if cpu.Xacts, err = meter.transactions(ctx); err != nil {
		return err
	}
	acc, err := s.account(ctx, jobs)
	if err != nil {
		return err
	}
	s.recordRate(jobs, insertWindow, cpu, acc)
	return nil
}

// producerPool opens the insert callers' pool, a connection for each caller, under the run's
// application_name, and waits until all are open.
func (s *session) producerPool(ctx context.Context) (*pgxpool.Pool, error) {
	callers := int32(rateCallers(s.opts.rate))
	cfg := s.cfg.Copy()
	cfg.MaxConns, cfg.MinConns = callers, callers
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(time.Minute); pool.Stat().IdleConns() < callers; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			pool.Close()
			return nil, fmt.Errorf("gave up waiting for the producer's %d connections", callers)
		}
	}
	return pool, nil
}

// insertAtRate inserts jobs 0 to jobs-1 on the schedule: job n falls due n/--rate after the start and
// is handed to the first free caller, which inserts it with InsertTx in a transaction of its own on
// its connection. It returns the time from the start until the last commit returned.
func (s *session) insertAtRate(ctx context.Context, pool *pgxpool.Pool, jobs int64) (time.Duration, error) {
	w := s.watch
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	due := make(chan int64, min(jobs, 1<<16))
	paceStart := time.Now()
	w.paced = paceStart.Sub(w.start)
	insert := func(n int64) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if _, err := s.client.InsertTx(ctx, tx, rateArgs{N: n, Payload: ratePayload}, nil); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	var wg sync.WaitGroup
	for range rateCallers(s.opts.rate) {
		wg.Go(func() {
			for n := range due {
				w.called[n].Store(w.now())
				if err := insert(n); err != nil {
					cancel(fmt.Errorf("inserting job %d: %w", n, err))
					return
				}
				w.inserted.Add(1)
			}
		})
	}
	err := pace(ctx, paceStart, s.opts.rate, jobs, due)
	close(due)
	wg.Wait()
	window := time.Since(paceStart)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return window, cause
	}
	if err != nil {
		return window, fmt.Errorf("interrupted while inserting: %w", err)
	}
	return window, nil
}

// perJob is d per job in microseconds, with one decimal.
func perJob(d time.Duration, jobs int64) float64 {
	if jobs <= 0 {
		return 0
	}
	return round(float64(d)/float64(time.Microsecond)/float64(jobs), 1)
}

// recordRate writes rate's RESULT pairs, with jobpipe rate's keys, and its measures as settings.
func (s *session) recordRate(jobs int64, insertWindow time.Duration, c cpuWindow, acc accounting) {
	o, r := s.opts, s.report
	starts, missing := between(s.watch.called, s.watch.began)
	slices.Sort(starts)
	// Each InsertTx is committed in a transaction of its own, which holds its wake-up notification.
	perJobXacts := func(x int64) float64 { return round(float64(x)/float64(max(jobs, 1)), 2) }
	r.result("scenario", "rate")
	r.result("peer", "river")
	r.result("jobs", jobs)
	r.result("rate", o.rate)
	r.result("rate_achieved", rate(jobs, insertWindow))
	r.result("seconds", round(c.Elapsed.Seconds(), 2))
	r.result("jobs_per_s", rate(jobs, c.Elapsed))
	r.result("workers", o.workers)
	r.result("handler_ms", round(float64(o.handler)/float64(time.Millisecond), 2))
	r.result("start_p50_ms", pctMs(starts, 50))
	r.result("start_p99_ms", pctMs(starts, 99))
	r.result("worker_cpu_us_per_job", perJob(c.Self, jobs))
	r.result("pg_cpu_us_per_job", perJob(c.PG, jobs))
	r.result("machine_cpu_us_per_job", perJob(c.Machine, jobs))
	r.result("xacts_per_job", perJobXacts(c.Xacts))
	r.result("dispatch_xacts_per_job", perJobXacts(c.Xacts-jobs))
	acc.record(r, s.unexpected.Load())
	if missing > 0 {
		r.fail("%d jobs' worker never began", missing)
	}
	share := func(part, whole time.Duration) float64 {
		if whole <= 0 {
			return 0
		}
		return round(100*float64(part)/float64(whole), 1)
	}
	r.setting("window_s", round(c.Elapsed.Seconds(), 2))
	r.setting("start_p90_ms / max_ms", fmt.Sprintf("%.2f / %.2f", pctMs(starts, 90), pctMs(starts, 100)))
	r.setting("process_cpu_s", fmt.Sprintf("%.2f (%.1f%% of one core)", c.Self.Seconds(), share(c.Self, c.Elapsed)))
	r.setting("pg_backends_cpu_s", fmt.Sprintf("%.2f over %d backends; %d connected, %d disconnected during the window",
		c.PG.Seconds(), c.Backends, c.Came, c.Went))
	r.setting("machine_cpu_s", fmt.Sprintf("%.2f busy of %.2f (%.1f%%)", c.Machine.Seconds(), c.MachineAll.Seconds(), share(c.Machine, c.MachineAll)))
	r.setting("xacts", fmt.Sprintf("%d, of which %d are the inserts'", c.Xacts, jobs))
	r.setting("other_clients_of_database", c.Others)
}

// databaseMarker is the comment rate puts on the database it creates: a database without it was not
// made by a run, and is never dropped.
const databaseMarker = "river peer bench: dropped at the end of the run"

// createDatabase creates the database name afresh next to cc's, and returns the function that drops
// it (unless keep). It refuses a database it did not create.
func createDatabase(ctx context.Context, cc *pgx.ConnConfig, name string, keep bool, log io.Writer) (func(context.Context), error) {
	cc = cc.Copy() // the caller goes on to point its own at the new database
	conn, err := pgx.ConnectConfig(ctx, cc.Copy())
	if err != nil {
		return nil, connectError(cc, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var comment *string
	err = conn.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1", name).Scan(&comment)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, err
	case comment == nil || *comment != databaseMarker:
		return nil, fmt.Errorf("database %s exists and was not made by this bench: pick another --schema (rate runs in a database named after it)", name)
	}
	ident := pgx.Identifier{name}.Sanitize()
	// CREATE and DROP DATABASE refuse to run in a transaction block, so one statement per call.
	for _, stmt := range []string{"DROP DATABASE IF EXISTS " + ident + " WITH (FORCE)", "CREATE DATABASE " + ident,
		"COMMENT ON DATABASE " + ident + " IS '" + databaseMarker + "'"} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege
				return nil, fmt.Errorf("rate runs in a database of its own, so that pg_stat_database counts its transactions "+
					"alone, and creating database %s was refused: %w: give the user CREATEDB (ALTER ROLE ... CREATEDB)", name, err)
			}
			return nil, fmt.Errorf("creating database %s: %w", name, err)
		}
	}
	return func(ctx context.Context) {
		if keep {
			fmt.Fprintf(log, "river bench: database %s kept (--keep)\n", name)
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		conn, err := pgx.ConnectConfig(ctx, cc.Copy())
		if err == nil {
			_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
			conn.Close(ctx)
		}
		if err != nil {
			fmt.Fprintf(log, "river bench: dropping database %s: %v\n", name, err)
		}
	}, nil
}
