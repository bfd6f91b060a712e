package jobpipe

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/execlock"
)

// Dispatcher is dispatcher.Dispatcher: it claims, runs and finishes the jobs of its registered kinds.
// Create it with New, add kinds with Register or RegisterTx, then Start; Stop shuts it down
// gracefully.
type Dispatcher = dispatcher.Dispatcher

// Config is dispatcher.Config: a Dispatcher's settings; each field's comment states its default.
type Config = dispatcher.Config

// New is dispatcher.New: it checks cfg and returns a Dispatcher. It does not connect; Start does.
func New(cfg Config) (*Dispatcher, error) { return dispatcher.New(cfg) }

// NewRedisClients is execlock.NewClients: the clients of the Redis lock nodes (Config.Redis), one per
// address, set up so that a stalled node cannot hold a call past its deadline.
func NewRedisClients(nodes ...string) ([]*redis.Client, error) { return execlock.NewClients(nodes...) }

// Job is dispatcher.Job: one job handed to a handler, its data and where it stands.
type Job[T any] = dispatcher.Job[T]

// Handler is dispatcher.Handler: it works one job of kind T, returning nil when the job is done or
// an error to retry it.
type Handler[T any] = dispatcher.Handler[T]

// TxHandler is dispatcher.TxHandler: a Handler that works inside a transaction, which commits
// together with the job's completion.
type TxHandler[T any] = dispatcher.TxHandler[T]

// Register is dispatcher.Register: it adds a kind and its handler. Call it before Start; each kind
// once.
func Register[T any](d *Dispatcher, kind *Kind[T], h Handler[T]) error {
	return dispatcher.Register(d, kind, h)
}

// RegisterTx is dispatcher.RegisterTx: Register for a TxHandler.
func RegisterTx[T any](d *Dispatcher, kind *Kind[T], h TxHandler[T]) error {
	return dispatcher.RegisterTx(d, kind, h)
}

// Snooze is dispatcher.Snooze: a handler returns it to put its job back to wait d, without counting
// the attempt.
func Snooze(d time.Duration) error { return dispatcher.Snooze(d) }

// Discard is dispatcher.Discard: a handler returns it to fail its job now, with err as its last
// error, however many attempts are left.
func Discard(err error) error { return dispatcher.Discard(err) }

// RunAgain is dispatcher.RunAgain: a handler returns it to mark its job processed and enqueue its
// next run, with the same data, d from now.
func RunAgain(d time.Duration) error { return dispatcher.RunAgain(d) }

// Causes a handler's context is cancelled with; read them with context.Cause.
var (
	// ErrLeaseLost is dispatcher.ErrLeaseLost: the job's lease or execution lock could not be
	// extended. Another dispatcher may run the job; this attempt is not recorded as done.
	ErrLeaseLost = dispatcher.ErrLeaseLost
	// ErrShutdown is dispatcher.ErrShutdown: the dispatcher is stopping and the job ran past Stop's
	// deadline. The job is put back to wait.
	ErrShutdown = dispatcher.ErrShutdown
	// ErrTimeout is dispatcher.ErrTimeout: the job ran past its kind's Timeout.
	ErrTimeout = dispatcher.ErrTimeout
)
