package jobinfo

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/backoff"
)

// Defaults for a kind's options.
const (
	// DefaultMaxAttempts is how many attempts a job gets before it fails for good. With the default
	// backoff policy its 24 retries wait 31.5 to 63 hours in all (see package backoff).
	DefaultMaxAttempts = 25
	// DefaultKeyLimit is the running limit per key of a keyed kind: unique while executing.
	DefaultKeyLimit = 1
	// DefaultRetainProcessed is how long processed jobs stay in the kind's table before the pruner
	// deletes them: a day to look at what ran.
	DefaultRetainProcessed = 24 * time.Hour
	// DefaultRetainFailed is how long failed jobs stay: a week to look into them and retry.
	DefaultRetainFailed = 7 * 24 * time.Hour
	// KeepForever, as a retention, keeps finished jobs until someone deletes them.
	KeepForever time.Duration = -1
	// DefaultTimeout is how long a handler may run before its context's deadline passes (see
	// Timeout): long enough for a webhook call or a batch of queries, short enough that a handler
	// stuck on a call without a deadline holds its key for a minute, not for ever.
	DefaultTimeout = time.Minute
	// NoTimeout, as a timeout, lets handlers run without a deadline.
	NoTimeout time.Duration = -1
)

// Info is the non-generic description of a kind that the rest of jobpipe works from.
type Info struct {
	// Name is the kind's name.
	Name string
	// TypeName is the name of the Go struct that carries the kind's data, for messages ("" when the
	// Info was not made by Define).
	TypeName string
	// Table is the kind's table, ready to sanitise.
	Table pgx.Identifier
	// Fields are the data columns in struct order.
	Fields []Field
	// Unique lists the columns of the until-executed unique key (empty: none).
	Unique []string
	// Key lists the columns of the concurrency key (empty: none).
	Key []string
	// Order is the order of jobs within a key.
	Order Order
	// MaxAttempts is how many attempts a job gets.
	MaxAttempts int
	// Backoff gives the delay before each retry.
	Backoff backoff.Policy
	// KeyLimit is how many jobs of one key may run at once (keyed kinds only).
	KeyLimit int
	// Concurrency is the most jobs of the kind that run at once in one dispatcher; 0 leaves it to the
	// dispatcher's configuration.
	Concurrency int
	// RetainProcessed and RetainFailed are how long processed and failed jobs stay in the table,
	// counted from when they finished, before the dispatcher's pruner deletes them. 0 or negative
	// keeps them forever (the zero Info prunes nothing).
	RetainProcessed, RetainFailed time.Duration
	// Timeout is how long a handler may run: its context's deadline is this long after it starts.
	// 0 or negative sets no deadline (the zero Info has none; Define sets DefaultTimeout).
	Timeout time.Duration

	noKey   bool     // NoKey was given, so that Check can name it as what removed the key
	derived *derived // what other packages build once from this kind (see Derived); set by Define
}

// Kind is a job kind whose data is carried by struct type T.
type Kind[T any] struct {
	info *Info
}

// Option configures a kind.
type Option func(*Info) error

// Table sets the kind's table, optionally schema-qualified ("billing.deliveries"). The default is the
// kind's name.
func Table(name string) Option {
	return func(i *Info) error {
		schema, table, err := splitTableName(name)
		if err != nil {
			return err
		}
		i.Table = pgx.Identifier{table}
		if schema != "" {
			i.Table = pgx.Identifier{schema, table}
		}
		return nil
	}
}

// WithOrder sets the order of jobs within a key (default OrderCreated).
func WithOrder(o Order) Option {
	return func(i *Info) error {
		i.Order = o
		return o.Validate()
	}
}

// MaxAttempts sets how many attempts a job gets before it fails for good (default DefaultMaxAttempts).
func MaxAttempts(n int) Option {
	return func(i *Info) error {
		if n < 1 {
			return fmt.Errorf("jobinfo: max attempts %d is not allowed: give 1 or more", n)
		}
		i.MaxAttempts = n
		return nil
	}
}

// Backoff sets the retry delay policy (default backoff.Default()).
func Backoff(p backoff.Policy) Option {
	return func(i *Info) error {
		if p == nil {
			return errors.New("jobinfo: backoff policy is nil: pass a backoff.Policy or leave the option out")
		}
		// Policies that can check their settings do so here, at definition, not at the first retry.
		if v, ok := p.(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				return err
			}
		}
		i.Backoff = p
		return nil
	}
}

// KeyLimit sets how many jobs of one key may run at once (default 1: unique while executing). It needs a
// concurrency key.
func KeyLimit(n int) Option {
	return func(i *Info) error {
		if n < 1 {
			return fmt.Errorf("jobinfo: key limit %d is not allowed: give 1 or more (pause a key with a dynamic limit of 0 instead)", n)
		}
		i.KeyLimit = n
		return nil
	}
}

// Concurrency sets the most jobs of the kind that run at once in one dispatcher.
func Concurrency(n int) Option {
	return func(i *Info) error {
		if n < 1 {
			return fmt.Errorf("jobinfo: concurrency %d is not allowed: give 1 or more", n)
		}
		i.Concurrency = n
		return nil
	}
}

// Retention sets how long finished jobs stay in the kind's table, counted from when they finished,
// before the dispatcher's pruner deletes them: processed for processed jobs (default
// DefaultRetainProcessed), failed for failed ones (default DefaultRetainFailed). KeepForever (any
// negative duration) keeps them. 0 is refused, as ambiguous: give a short duration to delete
// finished jobs soon after they finish.
func Retention(processed, failed time.Duration) Option {
	return func(i *Info) error {
		var errs []error
		for _, r := range []struct {
			what string
			d    time.Duration
		}{{"processed", processed}, {"failed", failed}} {
			if r.d == 0 {
				errs = append(errs, fmt.Errorf("jobinfo: retention of %s jobs is 0: give how long to keep them (e.g. 24*time.Hour), or jobinfo.KeepForever", r.what))
			}
		}
		i.RetainProcessed, i.RetainFailed = processed, failed
		return errors.Join(errs...)
	}
}

// Timeout sets how long a handler may run (default DefaultTimeout). The handler's context gets a
// deadline d after it starts, with a cause wrapping dispatcher.ErrTimeout that names d. A handler that
// returns an error after the deadline has its attempt retried with backoff (failed when no attempts
// are left) and its last error says it ran past its timeout; one that returns nil has done its work,
// and the job is processed (but a RegisterTx handler's transaction cannot commit after the deadline:
// it rolls back, and the attempt is retried as timed out). A handler that ignores its context is
// abandoned a grace period after the deadline (dispatcher.Config.HandlerGrace): its attempt is
// recorded as timed out, its lease and its key's slot are given back, and whatever it returns later
// changes nothing.
//
// 0 means the default. NoTimeout (any negative duration) sets no deadline: a handler then runs until it
// returns, its lease is lost, or Stop's deadline passes. A job cannot set its own timeout; a handler
// may shorten its deadline with context.WithTimeout, never lengthen it.
func Timeout(d time.Duration) Option {
	return func(i *Info) error {
		switch {
		case d == 0:
			i.Timeout = DefaultTimeout
		case d < 0:
			i.Timeout = NoTimeout
		default:
			i.Timeout = d
		}
		return nil
	}
}

// NoKey makes the unique fields only an until-executed unique key, not a concurrency key: jobs with equal
// unique fields may then run at the same time, in any order.
func NoKey() Option {
	return func(i *Info) error {
		i.Key = nil
		i.KeyLimit = 0
		i.noKey = true
		return nil
	}
}

// Define defines the kind name from struct type T. It checks the struct and the options and returns every
// problem in one error; it does not touch the database (see Kind.Check).
func Define[T any](name string, opts ...Option) (*Kind[T], error) {
	var errs []error
	if err := ValidateName("kind", name); err != nil {
		errs = append(errs, err)
	}
	typ := reflect.TypeFor[T]()
	fields, err := parseFields(typ)
	if err != nil {
		errs = append(errs, err)
	}
	info := &Info{Name: name, TypeName: typeName(typ), Table: pgx.Identifier{name}, Fields: fields, Order: OrderCreated,
		MaxAttempts: DefaultMaxAttempts, Backoff: backoff.Default(),
		RetainProcessed: DefaultRetainProcessed, RetainFailed: DefaultRetainFailed, Timeout: DefaultTimeout}
	for _, f := range fields {
		if f.Unique {
			info.Unique = append(info.Unique, f.Column)
		}
		if f.Key {
			info.Key = append(info.Key, f.Column)
		}
	}
	if len(info.Key) == 0 {
		info.Key = info.Unique
	}
	if len(info.Key) > 0 {
		info.KeyLimit = DefaultKeyLimit
	}
	for _, opt := range opts {
		if err := opt(info); err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range fields {
		if f.rule.nilable && slices.Contains(info.Key, f.Column) {
			errs = append(errs, fmt.Errorf("jobinfo: key field %s (%s) can be nil: a concurrency key must be NOT NULL; use a non-pointer type, or NoKey if it is only a unique field", f.GoName, f.Type))
		}
	}
	if info.KeyLimit > 0 && len(info.Key) == 0 {
		errs = append(errs, fmt.Errorf("jobinfo: kind %q has a key limit but no key: tag the key fields with `jobpipe:\"col,key\"`", name))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("jobinfo: kind %q: %w", name, errors.Join(errs...))
	}
	info.derived = &derived{owner: info}
	return &Kind[T]{info: info}, nil
}

// MustDefine is Define that panics on error, for package-level kind variables.
func MustDefine[T any](name string, opts ...Option) *Kind[T] {
	k, err := Define[T](name, opts...)
	if err != nil {
		panic(err)
	}
	return k
}

// Info returns the kind's description. It must not be modified.
func (k *Kind[T]) Info() *Info { return k.info }

// Name returns the kind's name.
func (k *Kind[T]) Name() string { return k.info.Name }

// Columns returns the data column names in struct order.
func (i *Info) Columns() []string {
	cols := make([]string, len(i.Fields))
	for j, f := range i.Fields {
		cols[j] = f.Column
	}
	return cols
}

// Values returns job's data column values in the order of Info.Fields.
func (k *Kind[T]) Values(job *T) []any {
	v := reflect.ValueOf(job).Elem()
	vals := make([]any, len(k.info.Fields))
	for j, f := range k.info.Fields {
		vals[j] = v.FieldByIndex(f.Index).Interface()
	}
	return vals
}

// ScanTargets returns pointers into job for each data column, in the order of Info.Fields, for
// pgx.Row.Scan. A time.Duration field gets a scanner that refuses an interval beyond its range rather
// than wrap around (see durationTarget).
func (k *Kind[T]) ScanTargets(job *T) []any {
	v := reflect.ValueOf(job).Elem()
	targets := make([]any, len(k.info.Fields))
	for j, f := range k.info.Fields {
		targets[j] = scanTarget(v.FieldByIndex(f.Index).Addr().Interface())
	}
	return targets
}

// TableSpec returns the table the kind's struct calls for, as CreateSQL would write it: each field gets
// the first column type its Go type maps to, NOT NULL unless the Go type can hold nil.
func (k *Kind[T]) TableSpec() TableSpec {
	i := k.info
	spec := TableSpec{Kind: i.Name, Table: tableString(i.Table), Unique: i.Unique, Key: i.Key, Order: i.Order}
	for _, f := range i.Fields {
		spec.Columns = append(spec.Columns, Column{Name: f.Column, Type: udtDDL[f.rule.udts[0]], Nullable: f.rule.nilable})
	}
	return spec
}

// KeyText returns an SQL expression for the concurrency key of the row aliased alias, as text: the
// column's text for a one-column key, a JSON array of the values for a longer one. Locks, limits and the
// command line name keys by it. It is "" for kinds without a key.
func (i *Info) KeyText(alias string) string {
	a := pgx.Identifier{alias}.Sanitize() + "."
	switch len(i.Key) {
	case 0:
		return ""
	case 1:
		return a + pgx.Identifier{i.Key[0]}.Sanitize() + "::text"
	}
	cols := make([]string, len(i.Key))
	for j, k := range i.Key {
		cols[j] = a + pgx.Identifier{k}.Sanitize()
	}
	return "json_build_array(" + strings.Join(cols, ", ") + ")::text"
}

// typeName is t's name as its package writes it, or its full description for an unnamed type.
func typeName(t reflect.Type) string {
	if t.Name() != "" {
		return t.Name()
	}
	return t.String()
}

func tableString(id pgx.Identifier) string {
	if len(id) == 2 {
		return id[0] + "." + id[1]
	}
	return id[0]
}
