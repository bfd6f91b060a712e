package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobpipe/jobpipe/execlock"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// kindRunner is one registered kind: what Register made of it, read-only once Start has begun, and
// the services that work it, each owning its state:
//   - prod, the producer: one goroutine that claims due jobs and starts a worker for each. Its fields
//     (claim positions, the limits copy, the heads picker) are its own (see producer.go);
//   - the workers: a goroutine per claimed job, running its handler and its key run (worker.go). A
//     job's state is the worker's: its claimed, running and attempt values;
//   - fin, the finisher: statement loops that write outcomes in batches (finisher.go).
//
// They meet only through the fields below the line, each safe for concurrent use: the producer
// takes capacity and workers give it back; workers submit to the finisher; anyone may wake the
// producer. Register's closures bridge to T.
type kindRunner struct {
	sh          *shared // the dispatcher's, shared with its other kinds and services
	info        *jobinfo.Info
	sql         kindSQL
	concurrency int
	keyed       bool // the kind has a concurrency key: its jobs hold slots of their key
	// decode reads a row's data columns into a *T.
	decode func(m *pgtype.Map, fds []pgconn.FieldDescription, raw [][]byte) (any, error)
	// handle runs the handler; tx is nil unless the kind was registered with RegisterTx.
	handle   func(ctx context.Context, tx pgx.Tx, c *claimed, r *running) error
	txMode   bool
	obs      KindObserver   // nil without Config.Observer: see observer.go
	runObs   KeyRunObserver // obs, when it counts key runs; nil otherwise
	pauseObs PauseObserver  // obs, when it counts claim passes without their pause; nil otherwise
	// timeout bounds each handler's run (0: none), and timeoutCause is its context's cause when it
	// passes, made once per kind (see timeout.go).
	timeout      time.Duration
	timeoutCause error

	// ---- shared by the services, each safe for concurrent use ----

	// lockWait is what a keyed kind's lock calls tell of the Redis nodes (see lockwatch.go).
	lockWait lockWait
	capacity *capacity
	// behind counts outcome batches and running leases whose last write could not reach the
	// database: the kind claims nothing until they are written (see reach.go).
	behind atomic.Int64
	wake   chan struct{} // buffered 1: "look for work": jobs may be due
	// hasTotal is set by the producer when the kind's limits have a total: the finisher must then
	// tell the other dispatchers each time a job of it finishes.
	hasTotal atomic.Bool
	// limitsStale is set when a change of the kind's limits was notified: the producer reads them again.
	limitsStale atomic.Bool

	// ---- the services ----

	prod *producer
	fin  *finisher
}

// Register adds a kind and its handler. Call it before Start; each kind once.
func Register[T any](d *Dispatcher, kind *jobinfo.Kind[T], h Handler[T]) error {
	if h == nil {
		return errors.New("dispatcher: Register: handler is nil")
	}
	return register(d, kind, false, func(ctx context.Context, _ pgx.Tx, job *Job[T]) error { return h(ctx, job) })
}

// RegisterTx adds a kind whose handler works inside a transaction that also marks the job processed
// (see TxHandler). Call it before Start; each kind once.
func RegisterTx[T any](d *Dispatcher, kind *jobinfo.Kind[T], h TxHandler[T]) error {
	if h == nil {
		return errors.New("dispatcher: RegisterTx: handler is nil")
	}
	return register(d, kind, true, h)
}

func register[T any](d *Dispatcher, kind *jobinfo.Kind[T], txMode bool, h TxHandler[T]) error {
	if kind == nil {
		return errors.New("dispatcher: Register: kind is nil")
	}
	info := kind.Info()
	k := &kindRunner{
		sh: d.shared, info: info, sql: buildSQL(info), concurrency: d.cfg.Concurrency, keyed: len(info.Key) > 0, txMode: txMode,
		wake: make(chan struct{}, 1), obs: d.kindObserver(info.Name),
		decode: func(m *pgtype.Map, fds []pgconn.FieldDescription, raw [][]byte) (any, error) {
			job := new(T)
			for i, target := range kind.ScanTargets(job) {
				if err := m.Scan(fds[i].DataTypeOID, fds[i].Format, raw[i], target); err != nil {
					return nil, fmt.Errorf("column %q: %w", info.Fields[i].Column, err)
				}
			}
			return job, nil
		},
		handle: func(ctx context.Context, tx pgx.Tx, c *claimed, r *running) error {
			job := &Job[T]{ID: c.id, Kind: info.Name, Data: *c.data.(*T), Attempt: c.attempt, MaxAttempts: info.MaxAttempts,
				Token: c.token, Key: c.key, Slot: c.slot, CreatedAt: c.createdAt, ProcessAfter: c.processAfter, run: r}
			return h(ctx, tx, job)
		},
	}
	if info.Concurrency > 0 {
		k.concurrency = info.Concurrency
	}
	if k.keyed {
		k.runObs, _ = k.obs.(KeyRunObserver)
		k.pauseObs, _ = k.obs.(PauseObserver)
	}
	k.capacity = newCapacity(k.concurrency)
	var err error
	if k.prod, err = newProducer(k); err != nil {
		return err
	}
	if info.Timeout > 0 {
		k.timeout, k.timeoutCause = info.Timeout, fmt.Errorf("%w of %v", ErrTimeout, info.Timeout)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.state != stateNew:
		return fmt.Errorf("dispatcher: Register %q: the dispatcher has started; register every kind before Start", info.Name)
	case d.kinds[info.Name] != nil:
		return fmt.Errorf("dispatcher: Register %q: the kind is registered already", info.Name)
	case k.keyed && d.locker == nil:
		return fmt.Errorf("dispatcher: Register %q: the kind has a concurrency key, which needs Redis lock nodes: set Config.Redis", info.Name)
	case k.keyed && info.KeyLimit > execlock.MaxLimit:
		return fmt.Errorf("dispatcher: Register %q: key limit %d is over the most slots a key can have (%d)", info.Name, info.KeyLimit, execlock.MaxLimit)
	}
	d.kinds[info.Name] = k
	return nil
}

// signal wakes the kind's producer without blocking.
func (k *kindRunner) signal() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}
