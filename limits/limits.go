package limits

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/keyslots"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// NotifyChannel is the channel every change of a limit notifies, with the kind's name as payload.
const NotifyChannel = "jobpipe_limits"

// MaxKeyLimit is the largest per-key limit: the number of lock slots one key can have.
const MaxKeyLimit = keyslots.Max

// MaxMaxRunning is the largest total limit of a kind (the database column is an integer).
const MaxMaxRunning = 1<<31 - 1

// ErrUnknownKind is returned for a kind that is not in the registry (jobpipe_kinds).
var ErrUnknownKind = errors.New("limits: unknown kind")

// ErrInvalid is returned for a limit out of range, a key given for a kind without key, or a malformed
// key value.
var ErrInvalid = errors.New("limits: invalid")

// Kind is what is stored for a kind. Nil limits are unset.
type Kind struct {
	// Name is the kind's name.
	Name string
	// KeyColumns are the columns of the kind's concurrency key; empty for a kind without key, which
	// has no per-key limits. Set by Get and List only.
	KeyColumns []string
	// MaxRunning is the kind's total limit across all dispatchers; nil: none.
	MaxRunning *int
	// KeyLimit is the kind's per-key default; nil: the kind's configured jobinfo.KeyLimit.
	KeyLimit *int
	// Paused halts the kind: no new job starts.
	Paused bool
	// UpdatedAt is when the row last changed; zero when nothing is stored.
	UpdatedAt time.Time
	// ConfiguredKeyLimit is the jobinfo.KeyLimit the kind was last registered with; nil for a kind
	// without key, and until a dispatcher registers the kind (see EffectiveKeyLimit). Set by Get and
	// List only.
	ConfiguredKeyLimit *int
}

// Unlimited is what EffectiveMaxRunning returns for a kind without a total limit.
const Unlimited = -1

// EffectiveMaxRunning is the kind's total limit in force: 0 when paused, Unlimited when none is set.
func (k Kind) EffectiveMaxRunning() int {
	switch {
	case k.Paused:
		return 0
	case k.MaxRunning != nil:
		return *k.MaxRunning
	}
	return Unlimited
}

// EffectiveKeyLimit is the limit in force for a key whose stored override is key (the zero Key when
// it has none): the key's pause or override, else the kind's per-key default, else the configured
// one, else jobinfo.DefaultKeyLimit. It means something only for a kind with a key (KeyColumns).
// A paused kind is not reflected here: see EffectiveMaxRunning.
//
// The configured limit is missing until a dispatcher registers the kind (a kind registered by the
// migration that creates its table has none yet); no job of the kind runs before that, and
// DefaultKeyLimit is what a kind gets unless jobinfo.KeyLimit says otherwise.
func (k Kind) EffectiveKeyLimit(key Key) int {
	switch {
	case key.Paused:
		return 0
	case key.Limit != nil:
		return *key.Limit
	case k.KeyLimit != nil:
		return *k.KeyLimit
	case k.ConfiguredKeyLimit != nil:
		return *k.ConfiguredKeyLimit
	}
	return jobinfo.DefaultKeyLimit
}

// Key is what is stored for one key value of a kind.
type Key struct {
	// Kind is the kind's name.
	Kind string
	// Value is the key value, as the kind's key text (see the package documentation).
	Value string
	// Limit is the key's running limit; nil: the kind's per-key default.
	Limit *int
	// Paused halts the key: no new job of it starts.
	Paused bool
	// UpdatedAt is when the row last changed; zero when nothing is stored.
	UpdatedAt time.Time
}

// SetMaxRunning sets the kind's total limit: at most n of its jobs run at once, across every
// dispatcher. 0 halts the kind.
func SetMaxRunning(ctx context.Context, db jobinfo.DB, kind string, n int) error {
	if n < 0 || n > MaxMaxRunning {
		return fmt.Errorf("%w limit %d for kind %q: want 0 (halt) to %d", ErrInvalid, n, kind, MaxMaxRunning)
	}
	return setKind(ctx, db, kind, false, "max_running", n)
}

// ClearMaxRunning removes the kind's total limit.
func ClearMaxRunning(ctx context.Context, db jobinfo.DB, kind string) error {
	return setKind(ctx, db, kind, false, "max_running", nil)
}

// SetKeyLimit sets the kind's per-key default: at most n jobs of one key value run at once, unless
// the key has an override. 0 halts every key without an override.
func SetKeyLimit(ctx context.Context, db jobinfo.DB, kind string, n int) error {
	if err := checkKeyLimit(kind, n); err != nil {
		return err
	}
	return setKind(ctx, db, kind, true, "key_limit", n)
}

// ClearKeyLimit removes the kind's per-key default: the configured jobinfo.KeyLimit applies again.
func ClearKeyLimit(ctx context.Context, db jobinfo.DB, kind string) error {
	return setKind(ctx, db, kind, true, "key_limit", nil)
}

// Pause halts the kind: no new job of it starts until Resume. Running jobs finish.
func Pause(ctx context.Context, db jobinfo.DB, kind string) error {
	return setKind(ctx, db, kind, false, "paused", true)
}

// Resume undoes Pause.
func Resume(ctx context.Context, db jobinfo.DB, kind string) error {
	return setKind(ctx, db, kind, false, "paused", false)
}

// SetKey sets the running limit of one key value of the kind, overriding the kind's per-key default.
// 0 halts the key.
func SetKey(ctx context.Context, db jobinfo.DB, kind, key string, n int) error {
	if err := checkKeyLimit(kind, n); err != nil {
		return err
	}
	return setKey(ctx, db, kind, key, "key_limit", n)
}

// ClearKey removes the key's override: the kind's per-key default applies to it again.
func ClearKey(ctx context.Context, db jobinfo.DB, kind, key string) error {
	return setKey(ctx, db, kind, key, "key_limit", nil)
}

// PauseKey halts one key value: no new job of it starts until ResumeKey. Running jobs finish.
func PauseKey(ctx context.Context, db jobinfo.DB, kind, key string) error {
	return setKey(ctx, db, kind, key, "paused", true)
}

// ResumeKey undoes PauseKey.
func ResumeKey(ctx context.Context, db jobinfo.DB, kind, key string) error {
	return setKey(ctx, db, kind, key, "paused", false)
}

func checkKeyLimit(kind string, n int) error {
	if n < 0 || n > MaxKeyLimit {
		return fmt.Errorf("%w per-key limit %d for kind %q: want 0 (halt) to %d", ErrInvalid, n, kind, MaxKeyLimit)
	}
	return nil
}

// setKind sets column col (max_running, key_limit or paused: constants, never user input) of the
// kind's row to value, in one transaction with the check that the kind is registered.
func setKind(ctx context.Context, db jobinfo.DB, kind string, needsKey bool, col string, value any) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		cols, err := keyColumns(ctx, tx, kind)
		if err != nil {
			return err
		}
		if needsKey && len(cols) == 0 {
			return fmt.Errorf("%w: kind %q has no key, so it has no per-key limit; limit its total instead "+
				"(SetMaxRunning, or jobpipe limit set %s N)", ErrInvalid, kind, kind)
		}
		if err := write(ctx, tx, setKindSQL, resetKindSQL, deleteEmptyKindSQL, col, value, kind); err != nil {
			return fmt.Errorf("limits: kind %q: %w", kind, err)
		}
		return nil
	})
}

// setKey is setKind for one key value's row.
func setKey(ctx context.Context, db jobinfo.DB, kind, key string, col string, value any) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		cols, err := keyColumns(ctx, tx, kind)
		if err != nil {
			return err
		}
		norm, err := normalizeKey(kind, cols, key)
		if err != nil {
			return err
		}
		if err := write(ctx, tx, setKeySQL, resetKeySQL, deleteEmptyKeySQL, col, value, kind, norm); err != nil {
			return fmt.Errorf("limits: kind %q key %q: %w", kind, norm, err)
		}
		return nil
	})
}

// write sets col of the row identified by ids to value with set, or with reset when value is the
// column's default (NULL or false), then deletes the row once nothing is left in it, so that the
// tables hold only what differs from the defaults.
//
// Setting is one INSERT ... ON CONFLICT DO UPDATE: with an INSERT ... DO NOTHING followed by an
// UPDATE, a concurrent change that emptied and deleted the row between the two would leave the
// UPDATE nothing to change, and the new limit would be lost. Resetting only updates: where there
// is no row there is nothing to reset, and creating one only to delete it would notify for nothing.
func write(ctx context.Context, tx pgx.Tx, set, reset, deleteEmpty, col string, value any, ids ...any) error {
	stmt := set
	if value == nil || value == false {
		stmt = reset
	}
	// A full slice expression, so that appending value never writes into ids' array.
	if _, err := tx.Exec(ctx, fmt.Sprintf(stmt, col), append(ids[:len(ids):len(ids)], value)...); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, deleteEmpty, ids...)
	return err
}

// keyColumns returns the key columns of a registered kind, or ErrUnknownKind.
func keyColumns(ctx context.Context, db jobinfo.DB, kind string) ([]string, error) {
	var cols []string
	err := db.QueryRow(ctx, keyColumnsSQL, kind).Scan(&cols)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, unknownKind(kind)
	}
	if err != nil {
		return nil, fmt.Errorf("limits: reading kind %q: %w", kind, err)
	}
	return cols, nil
}

func unknownKind(kind string) error {
	return fmt.Errorf("%w %q: it is not in jobpipe_kinds; a kind is registered when a dispatcher starts with it "+
		"or when the migration that creates its table (jobpipe kind new) is applied", ErrUnknownKind, kind)
}
