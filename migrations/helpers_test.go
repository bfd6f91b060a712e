package migrations_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/migrationtest"
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
	"jobpipe_lock_waits",
	"jobpipe_schedule_firings",
	"jobpipe_schedules",
}

// jobpipeMigrations returns jobpipe's embedded migrations, ascending by version.
func jobpipeMigrations(t *testing.T) []migrationtest.Migration {
	t.Helper()
	ms, err := migrationtest.Jobpipe()
	if err != nil {
		t.Fatalf("listing jobpipe's embedded migrations: %v", err)
	}
	return ms
}

// jobpipeLatest returns jobpipe's latest migration.
func jobpipeLatest(t *testing.T) migrationtest.Migration {
	t.Helper()
	ms := jobpipeMigrations(t)
	return ms[len(ms)-1]
}

// jobpipeResults is what applying ms reports, durations zeroed as by summary.
func jobpipeResults(ms []migrationtest.Migration) []migrations.Result {
	out := make([]migrations.Result, len(ms))
	for i, m := range ms {
		out[i] = migrations.Result{Source: migrations.SourceJobpipe, Version: m.Version, File: m.File}
	}
	return out
}

// tablesThrough is the tables in a schema where exactly ms of jobpipe's migrations are applied (or
// were and have been rolled back): the version table and what each of ms creates.
func tablesThrough(ms []migrationtest.Migration) []string {
	out := []string{migrations.VersionTable}
	for _, m := range ms {
		out = append(out, m.Tables...)
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
