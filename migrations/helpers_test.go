package migrations_test

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// tables returns the tables in the test's schema, sorted.
func tables(t *testing.T, s *testenv.Schema) []string {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(),
		`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, s.Name)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// jobpipeTables are the tables in a schema with all of jobpipe's migrations applied, its version
// table included: the one list to extend when a jobpipe migration creates a table.
// TestJobpipeTablesMatchMigrations checks it against the migration files.
var jobpipeTables = []string{
	"jobpipe_db_version",
	"jobpipe_key_limits",
	"jobpipe_kind_limits",
	"jobpipe_kinds",
	"jobpipe_leaders",
}

// jobpipeMigration is one of jobpipe's embedded migrations.
type jobpipeMigration struct {
	version int64
	file    string
	tables  []string // the tables its Up section creates
}

var (
	upSection   = regexp.MustCompile(`(?s)-- \+goose Up\n(.*?)(?:-- \+goose Down|\z)`)
	sqlComment  = regexp.MustCompile(`--[^\n]*`)
	createTable = regexp.MustCompile(`(?i)\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)`)
)

// loadJobpipeMigrations reads jobpipe's migrations from the embedded file system goose reads them
// from, ascending by version as goose applies them.
var loadJobpipeMigrations = sync.OnceValues(func() ([]jobpipeMigration, error) {
	fsys := migrations.OwnFS()
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	var out []jobpipeMigration
	for _, file := range files {
		prefix, _, ok := strings.Cut(file, "_")
		version, err := strconv.ParseInt(prefix, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s: no goose version before the first _", file)
		}
		content, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, err
		}
		up := upSection.FindSubmatch(content)
		if up == nil {
			return nil, fmt.Errorf("%s: no -- +goose Up section", file)
		}
		m := jobpipeMigration{version: version, file: file}
		for _, c := range createTable.FindAllSubmatch(sqlComment.ReplaceAll(up[1], nil), -1) {
			m.tables = append(m.tables, string(c[1]))
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no migrations embedded")
	}
	slices.SortFunc(out, func(a, b jobpipeMigration) int { return cmp.Compare(a.version, b.version) })
	return out, nil
})

// jobpipeMigrations returns jobpipe's embedded migrations, ascending by version.
func jobpipeMigrations(t *testing.T) []jobpipeMigration {
	t.Helper()
	ms, err := loadJobpipeMigrations()
	if err != nil {
		t.Fatalf("listing jobpipe's embedded migrations: %v", err)
	}
	return ms
}

// jobpipeLatest returns jobpipe's latest migration.
func jobpipeLatest(t *testing.T) jobpipeMigration {
	t.Helper()
	ms := jobpipeMigrations(t)
	return ms[len(ms)-1]
}

// jobpipeResults is what applying ms reports, durations zeroed as by summary.
func jobpipeResults(ms []jobpipeMigration) []migrations.Result {
	out := make([]migrations.Result, len(ms))
	for i, m := range ms {
		out[i] = migrations.Result{Source: migrations.SourceJobpipe, Version: m.version, File: m.file}
	}
	return out
}

// tablesThrough is the tables in a schema where exactly ms of jobpipe's migrations are applied (or
// were and have been rolled back): the version table and what each of ms creates.
func tablesThrough(ms []jobpipeMigration) []string {
	out := []string{migrations.VersionTable}
	for _, m := range ms {
		out = append(out, m.tables...)
	}
	slices.Sort(out)
	return out
}

// The list of jobpipe's tables the tests expect after up is what the migration files create.
func TestJobpipeTablesMatchMigrations(t *testing.T) {
	t.Parallel()
	if got := tablesThrough(jobpipeMigrations(t)); !slices.Equal(got, jobpipeTables) {
		t.Fatalf("jobpipe's migrations create %q, but jobpipeTables in helpers_test.go lists %q", got, jobpipeTables)
	}
}
