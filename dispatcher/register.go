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

// kindRunner is the non-generic machinery of one registered kind; Register's closures bridge to T.
type kindRunner struct {
	d           *Dispatcher
	info        *jobinfo.Info
	sql         kindSQL
	heads       headPicker // a keyed kind's; the producer's, like claimFrom
	concurrency int
	keyed       bool // the kind has a concurrency key: its jobs hold slots of their key
	// decode reads a row's data columns into a *T.
	decode func(m *pgtype.Map, fds []pgconn.FieldDescription, raw [][]byte) (any, error)
	// handle runs the handler; tx is nil unless the kind was registered with RegisterTx.
	handle func(ctx context.Context, tx pgx.Tx, c *claimed, r *running) error
	txMode bool
	obs    KindObserver // nil without Config.Observer: see observer.go
	// timeout bounds each handler's run (0: none), and timeoutCause is its context's cause when it
	// passes, made once per kind (see timeout.go).
	timeout      time.Duration
	timeoutCause error
	// lockWait is what a keyed kind's lock calls tell of the Redis nodes (see lockwatch.go).
	lockWait lockWait

	// limits, read when limitsRead is older than limitsTTL or limitsStale is set (see currentLimits).
	limits      kindLimits
	limitsRead  time.Time
	limitsStale atomic.Bool
	// hasTotal mirrors limits.maxRunning != nil for the finisher, which runs on its own goroutines:
	// a kind with a total must tell the other dispatchers each time a job of it finishes.
	hasTotal atomic.Bool
	// finishing counts jobs whose handler has returned and whose outcome is not written yet: they
	// hold no slot of sem, and produce claims no more while maxFinishing are pending, so claims never
	// run far ahead of the finisher.
	finishing atomic.Int64
	// behind counts outcome batches and running leases whose last write could not reach the
	// database: the kind claims nothing until they are written (see reach.go).
	behind atomic.Int64

	// claimWasFull is set by the producer: its last claim got all it asked for, so the kind has a
	// backlog (see produce, linger and plainClaimFrom).
	claimWasFull bool
	// Where the claims of a plain kind in created order start (see plainClaimFrom); the producer's.
	claimFrom   int64
	fullClaimAt time.Time
	// claimedFrom is where the last claim of a plain kind started: above 0, it skipped the front of
	// the index, where a job committed after a higher id may wait.
	claimedFrom int64

	// claimLinger bounds the producer's wait for a full claim's worth of free workers (see linger),
	// claimGather its wait before a claim without a backlog (see gather).
	claimLinger, claimGather time.Duration

	wake chan struct{} // buffered 1: "look for work": jobs may be due
	// freed is buffered 1: "a worker is free" (its handler returned, or an outcome was written). It
	// makes the producer look for work only while the kind has more due than it could take (see
	// produce); otherwise each job's end would cost a claim that finds nothing.
	freed chan struct{}
	sem   chan struct{} // one token per running job
	fin   *finisher
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
		d: d, info: info, sql: buildSQL(info), concurrency: d.cfg.Concurrency, keyed: len(info.Key) > 0, txMode: txMode,
		wake: make(chan struct{}, 1), freed: make(chan struct{}, 1), claimLinger: claimLinger, claimGather: claimGather, obs: d.kindObserver(info.Name),
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
	if k.keyed {
		var err error
		if k.heads, err = newHeadPicker(info); err != nil {
			return err
		}
	}
	if info.Concurrency > 0 {
		k.concurrency = info.Concurrency
	}
	if info.Timeout > 0 {
		k.timeout, k.timeoutCause = info.Timeout, fmt.Errorf("%w of %v", ErrTimeout, info.Timeout)
	}
	k.sem = make(chan struct{}, k.concurrency)
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

// workerFreed tells the kind's producer, without blocking, that a worker is free.
func (k *kindRunner) workerFreed() {
	select {
	case k.freed <- struct{}{}:
	default:
	}
}
