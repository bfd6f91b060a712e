package jobpipe

import (
	"time"

	"github.com/jobpipe/jobpipe/backoff"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// Kind is jobinfo.Kind: a job kind whose data is carried by struct type T.
type Kind[T any] = jobinfo.Kind[T]

// KindOption is jobinfo.Option: it configures a kind.
type KindOption = jobinfo.Option

// Define is jobinfo.Define: it defines the kind name from struct type T, checking the struct and
// the options and returning every problem in one error. It does not touch the database.
func Define[T any](name string, opts ...KindOption) (*Kind[T], error) {
	return jobinfo.Define[T](name, opts...)
}

// MustDefine is jobinfo.MustDefine: Define that panics on error, for package-level kind variables.
func MustDefine[T any](name string, opts ...KindOption) *Kind[T] {
	return jobinfo.MustDefine[T](name, opts...)
}

// MaxAttempts is jobinfo.MaxAttempts: how many attempts a job gets before it fails for good.
func MaxAttempts(n int) KindOption { return jobinfo.MaxAttempts(n) }

// Timeout is jobinfo.Timeout: how long a handler may run, the deadline of its context.
func Timeout(d time.Duration) KindOption { return jobinfo.Timeout(d) }

// KeyLimit is jobinfo.KeyLimit: how many jobs of one key may run at once (default 1).
func KeyLimit(n int) KindOption { return jobinfo.KeyLimit(n) }

// Concurrency is jobinfo.Concurrency: the most jobs of the kind that run at once in one dispatcher.
func Concurrency(n int) KindOption { return jobinfo.Concurrency(n) }

// NoKey is jobinfo.NoKey: the unique fields are only an until-executed unique key, not a concurrency
// key.
func NoKey() KindOption { return jobinfo.NoKey() }

// WithOrder is jobinfo.WithOrder: the order of jobs within a key (default OrderCreated).
func WithOrder(o Order) KindOption { return jobinfo.WithOrder(o) }

// Retention is jobinfo.Retention: how long processed and failed jobs stay in the kind's table before
// the dispatcher's pruner deletes them.
func Retention(processed, failed time.Duration) KindOption {
	return jobinfo.Retention(processed, failed)
}

// Table is jobinfo.Table: the kind's table, optionally schema-qualified (default the kind's name).
func Table(name string) KindOption { return jobinfo.Table(name) }

// Backoff is jobinfo.Backoff: the retry delay policy (package backoff makes them).
func Backoff(p backoff.Policy) KindOption { return jobinfo.Backoff(p) }

// Order is jobinfo.Order: how the jobs of one key are ordered.
type Order = jobinfo.Order

const (
	// OrderCreated is jobinfo.OrderCreated: jobs of a key start in the order they were enqueued.
	OrderCreated Order = jobinfo.OrderCreated
	// OrderProcessAfter is jobinfo.OrderProcessAfter: jobs of a key start in the order of their due
	// time.
	OrderProcessAfter Order = jobinfo.OrderProcessAfter
)
