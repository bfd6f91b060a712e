package migrations

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"
)

// UnknownVersionError reports versions recorded as applied for which there is no migration file:
// the database was migrated by other code (a newer jobpipe, or another branch of the
// application). Nothing is applied or rolled back while such a version exists, because goose
// could neither order new migrations after it nor roll it back.
type UnknownVersionError struct {
	Source   string  // SourceJobpipe or SourceApp
	Table    string  // the version table that records the versions
	Dir      string  // where the migration files were looked for
	Versions []int64 // the unknown versions, ascending
}

// Error names the versions, the table that records them and where their files were looked for,
// and says how to get the code that has them.
func (e *UnknownVersionError) Error() string {
	vs := make([]string, len(e.Versions))
	for i, v := range e.Versions {
		vs[i] = strconv.FormatInt(v, 10)
	}
	noun, it := "version", "it"
	if len(vs) > 1 {
		noun, it = "versions", "them"
	}
	fix := "check out the code that wrote " + it + " (or pass the directory that holds " + it + ")"
	if e.Source == SourceJobpipe {
		fix = "the database was migrated by a newer jobpipe: use that release, or check out the code that wrote " + it
	}
	return fmt.Sprintf("migrations: unknown %s %s: %s records %s as applied, but %s has no migration file for %s; %s",
		e.Source, noun, e.Table, strings.Join(vs, ", "), e.Dir, it, fix)
}

// MigrationError reports a migration that failed. Goose runs each SQL migration in a transaction,
// so a failed one left nothing behind, unless its file is marked -- +goose NO TRANSACTION.
type MigrationError struct {
	Source        string // SourceJobpipe or SourceApp
	File          string // the file's name for jobpipe's own; its path, DIR/NAME, for the application's
	Direction     string // "up" or "down"
	NoTransaction bool   // the file is marked -- +goose NO TRANSACTION
	Err           error  // the database's error
}

// Error names the file and the database's error, and says whether the database was left as it was.
func (e *MigrationError) Error() string {
	state := "it ran in a transaction, so none of it was applied: fix the file and run " + e.Direction + " again"
	if e.NoTransaction {
		state = "it is marked -- +goose NO TRANSACTION, so the statements before the failing one stay applied " +
			"and the database may need manual repair before running " + e.Direction + " again"
	}
	return fmt.Sprintf("migrations: %s migration %s failed (%s): %v; %s", e.Source, e.File, e.Direction, e.Err, state)
}

// Unwrap returns the database's error, so errors.As finds a *pgconn.PgError.
func (e *MigrationError) Unwrap() error { return e.Err }

// wrap prefixes err with the package and op, and says how to fix a database that cannot be reached.
func wrap(op string, err error) error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Config != nil {
		return &connectError{
			msg: fmt.Sprintf("migrations: %s: cannot connect to PostgreSQL at %s:%d: %s; "+
				"check that PostgreSQL is running there and that DATABASE_URL (or --database-url) points at it",
				op, ce.Config.Host, ce.Config.Port, dialCause(err)),
			err: err,
		}
	}
	return fmt.Errorf("migrations: %s: %w", op, err)
}

// connectError is a connection failure with a message of its own that still unwraps to pgconn's.
type connectError struct {
	msg string
	err error
}

func (e *connectError) Error() string { return e.msg }
func (e *connectError) Unwrap() error { return e.err }

// dialCause is the one line that says why a connection failed. pgconn's own message spans a line
// per address tried.
func dialCause(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Error()
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// failed turns goose's report of a failed migration into a MigrationError, and wraps anything else.
func (s *source) failed(direction string, err error) error {
	var pe *goose.PartialError
	if !errors.As(err, &pe) || pe.Failed == nil || pe.Failed.Source == nil {
		return wrap(s.name+" "+direction, err)
	}
	file := pe.Failed.Source.Path
	return &MigrationError{
		Source:        s.name,
		File:          s.display(file),
		Direction:     direction,
		NoTransaction: noTransaction(s.fsys, file),
		Err:           pe.Err,
	}
}

// display names a file for messages: the bare name for jobpipe's own, the path for the
// application's, which the user can open.
func (s *source) display(file string) string {
	if s.name == SourceJobpipe {
		return file
	}
	return filepath.Join(s.dir, file)
}

// noTransaction reports whether a migration file is marked -- +goose NO TRANSACTION, in which case
// goose ran it statement by statement and a failure may leave part of it applied.
func noTransaction(fsys fs.FS, file string) bool {
	f, err := fsys.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "-- +goose")
		if ok && strings.EqualFold(strings.TrimSpace(rest), "NO TRANSACTION") {
			return true
		}
	}
	return false
}
