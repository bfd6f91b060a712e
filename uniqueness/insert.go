package uniqueness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobpipe/jobpipe/internal/kindsql"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// Row is one job to insert: its data column values in the order of jobinfo.Info.Fields, and when it may
// start.
type Row struct {
	// Values are the data column values.
	Values []any
	// ProcessAfter, when set, is the earliest time the job may start.
	ProcessAfter *time.Time
	// ProcessIn, when positive and ProcessAfter is nil, delays the job by this long from the database's
	// clock, so a skewed application clock cannot start a job early.
	ProcessIn time.Duration
}

// schedule returns the two parameters of the process_after expression.
func (r Row) schedule() (at *time.Time, in *time.Duration) {
	if r.ProcessAfter != nil {
		return r.ProcessAfter, nil
	}
	if r.ProcessIn > 0 {
		return nil, &r.ProcessIn
	}
	return nil, nil
}

// Result is the outcome of inserting one job.
type Result struct {
	// ID is the id of the inserted job, or of the waiting job it duplicated.
	ID int64
	// Duplicate is true when a waiting job with the same unique fields existed; with a Replace strategy
	// that job was updated.
	Duplicate bool
	// Err is set by InsertMany for an item the Error strategy refused (a *DuplicateError).
	Err error
}

// NotifyChannel is the PostgreSQL NOTIFY channel on which jobpipe announces new and finished work; the
// payload is the kind's name. Every insert notifies it when its transaction commits.
const NotifyChannel = "jobpipe"

// Inserter inserts the jobs of one kind. Its statements are built once from validated identifiers.
type Inserter struct {
	info  *jobinfo.Info
	sql   map[Strategy]string
	quiet map[Strategy]string // sql without the notification, for InsertQuiet
	copy  []string            // COPY column list for kinds without unique fields
	pools poolNotifier        // the notifications InsertCoalesced shares among concurrent calls
}

// inserterKey is the key of a kind's Inserter in jobinfo.Info.Derived.
type inserterKey struct{}

// For returns the Inserter of a kind. A kind made by jobinfo.Define keeps its Inserter for as long as
// it lives (jobinfo.Info.Derived), so that its statements are built once and concurrent
// InsertCoalesced calls share notifications; for any other Info, For is New.
func For(info *jobinfo.Info) *Inserter {
	return info.Derived(inserterKey{}, func() any { return newInserter(info) }).(*Inserter)
}

// New builds an Inserter for info without keeping it, for a caller that builds a fresh Info for each
// request (package admin reads it from the registry each time). Building one renders its statements
// from templates: little next to the insert's round trip, but For keeps them where it can.
func New(info *jobinfo.Info) *Inserter { return newInserter(info) }

func newInserter(info *jobinfo.Info) *Inserter {
	in := &Inserter{info: info, sql: map[Strategy]string{}, quiet: map[Strategy]string{},
		copy: append([]string{"id"}, append(info.Columns(), "process_after")...)}
	for s, dup := range duplicates {
		in.sql[s] = kindsql.Insert(info, dup, NotifyChannel)
		in.quiet[s] = kindsql.Insert(info, dup, "")
	}
	return in
}

// duplicates says what each strategy does to the waiting duplicate in the insert statement; Error
// learns from the statement's result that there was one.
var duplicates = map[Strategy]kindsql.Duplicate{
	Skip: kindsql.KeepDuplicate, Error: kindsql.KeepDuplicate, Replace: kindsql.ReplaceDuplicate,
	ReplaceData: kindsql.ReplaceDuplicateData, ReplaceSchedule: kindsql.ReplaceDuplicateSchedule,
}

func notifyCall(kind string) string {
	return "pg_notify('" + NotifyChannel + "', '" + strings.ReplaceAll(kind, "'", "''") + "')"
}

// SQL returns the insert statement used for strategy s, for documentation and tests.
func (in *Inserter) SQL(s Strategy) string { return in.sql[s] }

func (in *Inserter) args(r Row) ([]any, error) {
	if len(r.Values) != len(in.info.Fields) {
		return nil, fmt.Errorf("uniqueness: kind %q takes %d values, got %d", in.info.Name, len(in.info.Fields), len(r.Values))
	}
	at, delay := r.schedule()
	return append(append(make([]any, 0, len(r.Values)+2), r.Values...), at, delay), nil
}

func (in *Inserter) statement(s Strategy) (string, error) {
	q, ok := in.sql[s]
	if !ok {
		return "", fmt.Errorf("uniqueness: strategy %v is unknown", s)
	}
	return q, nil
}

// Insert inserts one job, applying strategy s if a waiting job has the same unique fields. The
// statement notifies NotifyChannel, so the dispatchers wake when it commits, in db's transaction if db
// is one.
func (in *Inserter) Insert(ctx context.Context, db jobinfo.DB, r Row, s Strategy) (Result, error) {
	return in.insert(ctx, db, r, s, in.sql)
}

// InsertQuiet is Insert without the notification, for a caller that wakes the dispatchers itself
// once the insert has committed (InsertCoalesced does).
func (in *Inserter) InsertQuiet(ctx context.Context, db jobinfo.DB, r Row, s Strategy) (Result, error) {
	return in.insert(ctx, db, r, s, in.quiet)
}

func (in *Inserter) insert(ctx context.Context, db jobinfo.DB, r Row, s Strategy, statements map[Strategy]string) (Result, error) {
	q, ok := statements[s]
	if !ok {
		return Result{}, fmt.Errorf("uniqueness: strategy %v is unknown", s)
	}
	args, err := in.args(r)
	if err != nil {
		return Result{}, err
	}
	var res Result
	if err := db.QueryRow(ctx, q, args...).Scan(&res.ID, &res.Duplicate); err != nil {
		return Result{}, in.wrap(err)
	}
	if res.Duplicate && s == Error {
		return res, &DuplicateError{Kind: in.info.Name, ExistingID: res.ID}
	}
	return res, nil
}

func (in *Inserter) wrap(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		return fmt.Errorf("uniqueness: enqueueing a %q job: the kind's table %s does not exist: create it (jobpipe kind new, "+
			"then jobpipe migrate up) and register the kind (a dispatcher does at Start) (%w)", in.info.Name, in.info.Table.Sanitize(), err)
	}
	return fmt.Errorf("uniqueness: enqueueing a %q job: %w", in.info.Name, err)
}
