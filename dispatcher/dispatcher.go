package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/execlock"
)

type lifecycle int

const (
	stateNew lifecycle = iota
	stateRunning
	stateStopped
)

// Dispatcher claims, runs and finishes the jobs of its registered kinds. Create it with New, add kinds
// with Register or RegisterTx, then Start; Stop shuts it down gracefully. Any number of dispatchers, in
// any number of processes, may work the same kinds: they never claim the same job.
type Dispatcher struct {
	*shared

	mu        sync.Mutex
	state     lifecycle
	kinds     map[string]*kindRunner
	schedules map[string]*scheduleRunner // added before Start, read-only after (see schedule.go)

	stopLoops  context.CancelFunc      // stops the producers, listener, leader and lock watch
	loops      sync.WaitGroup          // the producers, listener, leader and lock watch
	cancelJobs context.CancelCauseFunc // cancels running jobs at Stop's deadline
}

// shared is what the services of a dispatcher (each kind's producer, workers and finisher, the
// listener, the leader, the lock watch) share. New and Start set it before any service runs; it is
// read-only after, and each field is safe for concurrent use. It holds no service's own state: a
// kind's producer, its workers and its finisher keep theirs in their own types.
type shared struct {
	cfg    Config
	logger *slog.Logger
	// db is the dispatcher's own pool (Config.DispatcherConns), opened by Start and closed by Stop: its
	// statements never wait behind the application's use of Config.DB.
	db      *pgxpool.Pool
	txConns connBudget       // RegisterTx handlers' share of Config.DB
	locker  *execlock.Locker // nil without Redis nodes
	stats   stats
	// lockWake wakes the lock watch when a kind's lock calls begin to fail (see lockwatch.go).
	lockWake chan struct{}
	jobsCtx  context.Context // parent of every job's context
	workers  sync.WaitGroup  // running jobs
	// stopDeadline is closed when Stop's deadline passes: outcomes the database has not taken by then are given up.
	stopDeadline chan struct{}
	// unreachableAt is when a statement of this dispatcher last failed to reach the database (Unix
	// nanoseconds; see reach.go).
	unreachableAt atomic.Int64
}

// New checks cfg and returns a Dispatcher. It does not connect; Start does.
func New(cfg Config) (*Dispatcher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &Dispatcher{kinds: map[string]*kindRunner{}, shared: &shared{cfg: cfg, logger: cfg.Logger,
		txConns: newConnBudget(cfg.TxHandlerConns), lockWake: make(chan struct{}, 1), stopDeadline: make(chan struct{})}}
	if len(cfg.Redis) > 0 {
		locker, err := execlock.New(&execlock.Config{Nodes: cfg.Redis, Prefix: cfg.RedisPrefix,
			ExecTTL: cfg.LeaseTTL, QueueTTL: cfg.LeaseTTL, NodeName: cfg.NodeName})
		if err != nil {
			return nil, fmt.Errorf("dispatcher: %w", err)
		}
		d.locker = locker
	}
	return d, nil
}

// Start checks every registered kind's table against its Go type (reporting every mismatch of every
// kind at once), records the kinds in the registry, and starts working. ctx bounds only these checks:
// the dispatcher runs until Stop.
//
// When a kind with a concurrency key is registered, Start also sends PING to every Redis lock node
// (Config.Redis), each bounded by ctx and by the lock call timeout (execlock.DefaultCallTimeout, or a
// quarter of LeaseTTL when shorter). Fewer answers than a quorum (a majority of the nodes) is an
// error that names each node that did not answer, with its error, unless
// Config.StartWithoutLockQuorum is set. Kinds without a key never touch Redis, so a dispatcher with
// only such kinds does not check the nodes.
//
// While it runs, a dispatcher with a keyed kind keeps watching the nodes. A kind whose lock calls
// keep failing for want of a quorum (not contention: a lock held elsewhere is an answer) is logged at
// WARN once, after a second of failures, naming the nodes that do not answer, the latest error and
// how many of its jobs are due; again at WARN every minute while it lasts; and at INFO when its lock
// calls succeed again. The Observer is told (LockNodes, KindObserver.LockWait), and the wait is
// recorded in jobpipe_lock_waits, where `jobpipe kinds` and the dashboard show it.
//
// When Start returns an error, nothing has been started and Start may be called again.
func (d *Dispatcher) Start(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state != stateNew {
		return errors.New("dispatcher: Start: the dispatcher has already been started; create a new one")
	}
	if len(d.kinds) == 0 {
		return errors.New("dispatcher: Start: no kinds are registered: call Register first")
	}
	// Every problem at once: the lock nodes, then each kind's table.
	answers, noQuorum, err := d.checkLockNodes(ctx)
	errs := []error{err}
	for _, k := range d.kinds {
		if err := k.info.Register(ctx, d.cfg.DB); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	d.reportOutdatedIndexes(ctx)
	if err := d.saveSchedules(ctx); err != nil {
		return err
	}
	own := d.cfg.DB.Config()
	own.MaxConns = int32(d.cfg.DispatcherConns)
	own.MinConns, own.MinIdleConns = min(own.MinConns, own.MaxConns), min(own.MinIdleConns, own.MaxConns)
	db, err := pgxpool.NewWithConfig(context.WithoutCancel(ctx), own)
	if err != nil {
		return fmt.Errorf("dispatcher: Start: opening the dispatcher's own pool: %w", err)
	}
	d.db = db
	loopCtx, stop := context.WithCancel(context.Background())
	d.stopLoops = stop
	d.jobsCtx, d.cancelJobs = context.WithCancelCause(context.Background())
	for _, k := range d.kinds {
		k.fin = newFinisher(k)
		k.fin.start()
		d.loops.Go(func() { k.prod.run(loopCtx) })
	}
	if !d.cfg.PollOnly {
		l := &listener{shared: d.shared, kinds: d.kinds}
		d.loops.Go(func() { l.run(loopCtx) })
	}
	l := &leader{shared: d.shared, kinds: d.kinds, schedules: d.schedules}
	d.loops.Go(func() { l.run(loopCtx) })
	if answers != nil {
		w := &lockWatch{shared: d.shared, kinds: d.kinds}
		d.loops.Go(func() { w.run(loopCtx, answers) })
	}
	if noQuorum != "" {
		d.logger.Warn("dispatcher: started without a quorum of Redis lock nodes (Config.StartWithoutLockQuorum); keyed jobs wait until a quorum answers",
			"problem", noQuorum)
	}
	d.state = stateRunning
	return nil
}

// reportOutdatedIndexes warns of each index of a kind's table that an older version created with a
// predicate that can mislead the planner (see jobinfo.Info.OutdatedIndexes). The kind works with it,
// so Start goes on.
func (d *Dispatcher) reportOutdatedIndexes(ctx context.Context) {
	for _, k := range d.kinds {
		lines, err := k.info.OutdatedIndexes(ctx, d.cfg.DB)
		if err != nil {
			d.logger.Warn("dispatcher: could not check the kind's indexes", "kind", k.info.Name, "err", err)
		}
		for _, line := range lines {
			d.logger.Warn("dispatcher: an index of the kind's table is outdated", "kind", k.info.Name, "index", line)
		}
	}
}

// Stop shuts the dispatcher down: it stops claiming, lets running jobs finish until ctx is done, then
// cancels the rest (their context's cause is ErrShutdown) and waits for them to return, records every
// outcome, gives up leadership and releases every lock, with the deletes of lock values that failed
// calls may have left on some Redis nodes (at most three lock call timeouts more when a node does not
// answer, whatever ctx). A handler that has not returned
// Config.HandlerGrace after its context was cancelled is abandoned: its job goes back to wait, and Stop
// returns without waiting for its goroutine. Outcomes the database has not taken when ctx is done (it
// cannot be reached) are given up: their jobs are rescued once their leases expire.
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.mu.Lock()
	if d.state != stateRunning {
		d.mu.Unlock()
		return errors.New("dispatcher: Stop: the dispatcher is not running")
	}
	d.state = stateStopped
	d.mu.Unlock()

	d.stopLoops()
	d.loops.Wait()
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			close(d.stopDeadline)
		case <-stopped:
		}
	}()
	workersDone := make(chan struct{})
	go func() {
		d.workers.Wait()
		close(workersDone)
	}()
	var err error
	select {
	case <-workersDone:
	case <-ctx.Done():
		err = fmt.Errorf("dispatcher: Stop: running jobs were cancelled at the deadline: %w", ctx.Err())
		d.cancelJobs(ErrShutdown)
		<-workersDone
	}
	d.cancelJobs(ErrShutdown)
	for _, k := range d.kinds {
		k.fin.close()
	}
	if d.locker != nil {
		d.locker.Close() // ends its background clean-up of lock deletes; the clients stay the caller's
	}
	d.db.Close()
	return err
}

// Stats returns counters of what the dispatcher has done since New.
func (d *Dispatcher) Stats() Stats { return d.stats.snapshot(d.locker) }

// connBudget bounds how many RegisterTx handlers hold a connection of Config.DB at once, so that they
// queue for one rather than take every connection the application has.
type connBudget chan struct{}

func newConnBudget(n int) connBudget { return make(connBudget, n) }

// acquire waits for a share of the budget until ctx is done.
func (b connBudget) acquire(ctx context.Context) error {
	select {
	case b <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (b connBudget) release() { <-b }
