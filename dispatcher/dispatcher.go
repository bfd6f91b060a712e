package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

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
	cfg    Config
	logger *slog.Logger
	locker *execlock.Locker // nil without Redis nodes
	stats  stats

	mu        sync.Mutex
	state     lifecycle
	kinds     map[string]*kindRunner
	schedules map[string]*scheduleRunner // added before Start, read-only after (see schedule.go)

	stopLoops  context.CancelFunc      // stops producers, listener and leader
	loops      sync.WaitGroup          // producers, listener, leader
	jobsCtx    context.Context         // parent of every job's context
	cancelJobs context.CancelCauseFunc // cancels running jobs at Stop's deadline
	workers    sync.WaitGroup          // running jobs
	// abandon is closed at Stop's deadline: outcomes the database has not taken by then are given up.
	abandon chan struct{}
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
	d := &Dispatcher{cfg: cfg, logger: cfg.Logger, kinds: map[string]*kindRunner{}, abandon: make(chan struct{})}
	if len(cfg.Redis) > 0 {
		locker, err := execlock.New(&execlock.Config{Nodes: cfg.Redis, Prefix: cfg.RedisPrefix,
			ExecTTL: cfg.LeaseTTL, QueueTTL: cfg.LeaseTTL, NodeName: cfg.NodeName, DisablePipelining: cfg.DisableLockPipelining})
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
func (d *Dispatcher) Start(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state != stateNew {
		return errors.New("dispatcher: Start: the dispatcher has already been started; create a new one")
	}
	if len(d.kinds) == 0 {
		return errors.New("dispatcher: Start: no kinds are registered: call Register first")
	}
	var errs []error
	for _, k := range d.kinds {
		if err := k.info.Register(ctx, d.cfg.DB); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := d.saveSchedules(ctx); err != nil {
		return err
	}
	loopCtx, stop := context.WithCancel(context.Background())
	d.stopLoops = stop
	d.jobsCtx, d.cancelJobs = context.WithCancelCause(context.Background())
	for _, k := range d.kinds {
		k.fin = newFinisher(k)
		k.fin.start()
		d.loops.Add(1)
		go func() {
			defer d.loops.Done()
			k.produce(loopCtx)
		}()
	}
	if !d.cfg.PollOnly {
		d.loops.Add(1)
		go func() {
			defer d.loops.Done()
			d.listen(loopCtx)
		}()
	}
	d.loops.Add(1)
	go func() {
		defer d.loops.Done()
		d.lead(loopCtx)
	}()
	d.state = stateRunning
	return nil
}

// Stop shuts the dispatcher down: it stops claiming, lets running jobs finish until ctx is done, then
// cancels the rest (their context's cause is ErrShutdown) and waits for them to return, records every
// outcome, gives up leadership and releases every lock. Handlers must return once their context is
// cancelled for Stop to return. Outcomes the database has not taken when ctx is done (it cannot be
// reached) are given up: their jobs are rescued once their leases expire.
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
			close(d.abandon)
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
		close(k.fin.reqs)
		<-k.fin.done
	}
	if d.locker != nil {
		d.locker.Close() // ends its background clean-up of lock deletes; the clients stay the caller's
	}
	return err
}

// Stats returns counters of what the dispatcher has done since New.
func (d *Dispatcher) Stats() Stats { return d.stats.snapshot(d.locker) }
