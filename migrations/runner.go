package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pressly/goose/v3"
)

// Runner applies, rolls back and reports jobpipe's own migrations and, optionally, an
// application's migration directory, in dependency order. Build one with [NewRunner].
//
// A Runner is safe for concurrent use; writes from any number of Runners against the same schema
// are serialised by a PostgreSQL advisory lock.
type Runner struct {
	db *sql.DB
	// sources holds jobpipe's migrations first, then the application's if a directory was given:
	// the order up applies them in.
	sources []*source
}

// Result is one migration that was applied or rolled back.
type Result struct {
	Source   string // SourceJobpipe or SourceApp
	Version  int64
	File     string // the file's base name
	Duration time.Duration
}

// NewRunner returns a Runner for jobpipe's migrations and, when appDir is not empty, the goose SQL
// migrations in appDir (recorded in [AppVersionTable]). The version tables live in the
// connection's current schema, the first existing schema of its search_path.
//
// db is typically stdlib.OpenDBFromPool(pool) or stdlib.OpenDB(config); the Runner does not close
// it. NewRunner queries the database once, so an unreachable database fails here.
func NewRunner(ctx context.Context, db *sql.DB, appDir string) (*Runner, error) {
	if db == nil {
		return nil, errors.New("migrations: NewRunner needs a *sql.DB: open one with stdlib.OpenDBFromPool(pool)")
	}
	schema, err := currentSchema(ctx, db)
	if err != nil {
		return nil, err
	}
	own, err := newSource(db, schema, SourceJobpipe, VersionTable, ownDir, ownFS())
	if err != nil {
		return nil, err
	}
	r := &Runner{db: db, sources: []*source{own}}
	if appDir == "" {
		return r, nil
	}
	if err := checkDir(appDir); err != nil {
		return nil, err
	}
	app, err := newSource(db, schema, SourceApp, AppVersionTable, appDir, os.DirFS(appDir))
	if err != nil {
		return nil, err
	}
	r.sources = append(r.sources, app)
	return r, nil
}

func currentSchema(ctx context.Context, db *sql.DB) (string, error) {
	var schema sql.NullString
	var searchPath string
	if err := db.QueryRowContext(ctx, `SELECT current_schema(), current_setting('search_path')`).Scan(&schema, &searchPath); err != nil {
		return "", wrap("finding the current schema", err)
	}
	if !schema.Valid {
		return "", fmt.Errorf("migrations: no schema to migrate: search_path %q names no existing schema; "+
			"create the schema or fix search_path (in the database URL: ?search_path=SCHEMA)", searchPath)
	}
	return schema.String, nil
}

func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("migrations: migration directory %s does not exist; pass the directory that holds your goose .sql files", dir)
	}
	if err != nil {
		return fmt.Errorf("migrations: migration directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("migrations: migration directory %s is a file, not a directory; pass the directory that holds your goose .sql files", dir)
	}
	return nil
}

// Up applies every pending migration: jobpipe's first, then the application's. It returns the
// migrations applied, in order; none when the database is up to date.
//
// Before applying anything it checks both version tables for versions that have no file and
// returns an [*UnknownVersionError] if it finds one. A failed migration returns a
// [*MigrationError] together with the migrations applied before it.
func (r *Runner) Up(ctx context.Context) ([]Result, error) {
	if _, err := r.check(ctx); err != nil {
		return nil, err
	}
	var out []Result
	for _, s := range r.sources {
		res, err := s.up(ctx)
		out = append(out, res...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// Down rolls back one migration: the application's latest when the Runner has a directory (its
// tables depend on jobpipe's, so jobpipe's stay until the application's are gone), else jobpipe's
// latest. It returns nil and no error when that source has nothing applied.
func (r *Runner) Down(ctx context.Context) (*Result, error) {
	applied, err := r.check(ctx)
	if err != nil {
		return nil, err
	}
	last := len(r.sources) - 1
	s := r.sources[last]
	if len(applied[last]) == 0 || s.provider == nil {
		return nil, nil
	}
	res, err := s.provider.Down(ctx)
	if errors.Is(err, goose.ErrNoNextVersion) {
		// Another run rolled it back since check.
		return nil, nil
	}
	if err != nil {
		return nil, s.failed("down", err)
	}
	out := s.result(res)
	return &out, nil
}

// check returns what each source has applied, in r.sources order, or an [*UnknownVersionError].
func (r *Runner) check(ctx context.Context) ([]map[int64]time.Time, error) {
	out := make([]map[int64]time.Time, len(r.sources))
	for i, s := range r.sources {
		applied, err := s.applied(ctx, r.db)
		if err != nil {
			return nil, err
		}
		if unknown := s.unknown(applied); len(unknown) > 0 {
			return nil, &UnknownVersionError{Source: s.name, Table: s.table, Dir: s.dir, Versions: unknown}
		}
		out[i] = applied
	}
	return out, nil
}

func (s *source) up(ctx context.Context) ([]Result, error) {
	if s.provider == nil {
		return nil, nil
	}
	res, err := s.provider.Up(ctx)
	var pe *goose.PartialError
	if errors.As(err, &pe) {
		return s.results(pe.Applied), s.failed("up", err)
	}
	if err != nil {
		return nil, s.failed("up", err)
	}
	return s.results(res), nil
}

func (s *source) results(in []*goose.MigrationResult) []Result {
	out := make([]Result, 0, len(in))
	for _, r := range in {
		out = append(out, s.result(r))
	}
	return out
}

func (s *source) result(r *goose.MigrationResult) Result {
	return Result{
		Source:   s.name,
		Version:  r.Source.Version,
		File:     filepath.Base(r.Source.Path),
		Duration: r.Duration,
	}
}
