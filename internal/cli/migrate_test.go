package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/migrationtest"
	"github.com/jobpipe/jobpipe/internal/testenv"
)

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

// jobpipeMigrations returns jobpipe's migrations, ascending by version.
func jobpipeMigrations(t *testing.T) []migrationtest.Migration {
	t.Helper()
	ms, err := migrationtest.Jobpipe()
	if err != nil {
		t.Fatalf("listing jobpipe's migrations: %v", err)
	}
	return ms
}

// jobpipeLatest returns the version of jobpipe's latest migration.
func jobpipeLatest(t *testing.T) int64 {
	t.Helper()
	ms := jobpipeMigrations(t)
	return ms[len(ms)-1].Version
}

// jobpipeApplied is what "migrate up" prints for applying each of jobpipe's migrations, after stable.
func jobpipeApplied(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, m := range jobpipeMigrations(t) {
		fmt.Fprintf(&b, "applied jobpipe %s (Nms)\n", m.File)
	}
	return b.String()
}

// appliedCount is the summary line's start for n migrations applied, e.g. "applied 2 migrations".
func appliedCount(n int) string {
	if n == 1 {
		return "applied 1 migration"
	}
	return fmt.Sprintf("applied %d migrations", n)
}

// jobpipeStatusRows are "migrate status" rows for each of jobpipe's migrations, applied at "at"
// (after stable) or "pending".
func jobpipeStatusRows(t *testing.T, at string) [][]string {
	t.Helper()
	var rows [][]string
	for _, m := range jobpipeMigrations(t) {
		rows = append(rows, []string{"jobpipe", strconv.FormatInt(m.Version, 10), at, m.File})
	}
	return rows
}

// statusTable is the output of "migrate status" with rows of SOURCE, VERSION, APPLIED AT and FILE:
// each column but the last as wide as its widest cell plus two spaces.
func statusTable(rows ...[]string) string {
	rows = append([][]string{{"SOURCE", "VERSION", "APPLIED AT", "FILE"}}, rows...)
	var widths [3]int
	for _, r := range rows {
		for c := range widths {
			widths[c] = max(widths[c], len(r[c]))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for c, w := range widths {
			b.WriteString(r[c] + strings.Repeat(" ", w+2-len(r[c])))
		}
		b.WriteString(r[3] + "\n")
	}
	return b.String()
}

// tablesThrough is the tables in a schema where exactly ms of jobpipe's migrations are applied (or
// were and have been rolled back): the version table and what each of ms creates.
func tablesThrough(ms []migrationtest.Migration) []string {
	out := []string{"jobpipe_db_version"}
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
		t.Fatalf("jobpipe's migrations create %q, but jobpipeTables in migrate_test.go lists %q", got, jobpipeTables)
	}
}

var (
	durations  = regexp.MustCompile(`\(\d+ms\)`)
	timestamps = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`)
)

// stable replaces what varies between runs: durations and timestamps (keeping their width, so the
// columns of status stay aligned).
func stable(s string) string {
	s = durations.ReplaceAllString(s, "(Nms)")
	return timestamps.ReplaceAllString(s, "YYYY-MM-DD hh:mm:ss")
}

// migrate runs "jobpipe migrate ARGS --database-url URL" and checks exit code and output exactly,
// after stable.
func migrate(t *testing.T, s *testenv.Schema, wantCode int, wantStdout, wantStderr string, args ...string) {
	t.Helper()
	args = append(append([]string{"migrate"}, args...), "--database-url", s.URL)
	code, stdout, stderr := runCLI(t, args...)
	check(t, args, code, stable(stdout), stable(stderr), wantCode, wantStdout, wantStderr)
}

func assertTables(t *testing.T, s *testenv.Schema, want ...string) {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(),
		`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, s.Name)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("tables = %q, want %q", got, want)
	}
}

func TestMigrateJobpipe(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)

	ms := jobpipeMigrations(t)
	latest := jobpipeLatest(t)

	migrate(t, s, 0, statusTable(jobpipeStatusRows(t, "pending")...), "", "status")
	migrate(t, s, 0, fmt.Sprintf("jobpipe version 0 (latest %d)\n", latest), "", "version")
	migrate(t, s, 0, "nothing to roll back: no jobpipe migrations are applied\n", "", "down")
	assertTables(t, s) // reading creates nothing

	migrate(t, s, 0, jobpipeApplied(t)+
		fmt.Sprintf("%s; now jobpipe at version %d\n", appliedCount(len(ms)), latest), "", "up")
	assertTables(t, s, jobpipeTables...)
	migrate(t, s, 0, fmt.Sprintf("nothing to apply; jobpipe at version %d\n", latest), "", "up")
	assertTables(t, s, jobpipeTables...)

	migrate(t, s, 0, statusTable(jobpipeStatusRows(t, "YYYY-MM-DD hh:mm:ss")...), "", "status")
	migrate(t, s, 0, fmt.Sprintf("jobpipe version %d (latest %d)\n", latest, latest), "", "version")

	// Down rolls back jobpipe's latest migration, then the one before it, down to none.
	for i := len(ms) - 1; i >= 0; i-- {
		var prev int64
		if i > 0 {
			prev = ms[i-1].Version
		}
		migrate(t, s, 0, fmt.Sprintf("rolled back jobpipe %s (Nms)\nnow jobpipe at version %d\n", ms[i].File, prev), "", "down")
		assertTables(t, s, tablesThrough(ms[:i])...)
	}
	migrate(t, s, 0, "nothing to roll back: no jobpipe migrations are applied\n", "", "down")
}

func TestMigrateWithAppDir(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "20250101000000_create_emails.sql"), `-- +goose Up
CREATE TABLE emails (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, address text NOT NULL);
INSERT INTO jobpipe_kinds (name, table_name) VALUES ('emails', 'emails');

-- +goose Down
DELETE FROM jobpipe_kinds WHERE name = 'emails';
DROP TABLE emails;
`)
	writeFile(t, filepath.Join(dir, "20250102000000_email_kind.sql"), `-- +goose Up
ALTER TABLE emails ADD COLUMN kind text NOT NULL DEFAULT 'emails' REFERENCES jobpipe_kinds (name);

-- +goose Down
ALTER TABLE emails DROP COLUMN kind;
`)

	ms := jobpipeMigrations(t)
	latest := jobpipeLatest(t)

	migrate(t, s, 0, statusTable(append(jobpipeStatusRows(t, "pending"),
		[]string{"app", "20250101000000", "pending", "20250101000000_create_emails.sql"},
		[]string{"app", "20250102000000", "pending", "20250102000000_email_kind.sql"})...), "", "status", "--dir", dir)
	migrate(t, s, 0, jobpipeApplied(t)+
		"applied app 20250101000000_create_emails.sql (Nms)\n"+
		"applied app 20250102000000_email_kind.sql (Nms)\n"+
		fmt.Sprintf("%s; now jobpipe at version %d, app at version 20250102000000\n", appliedCount(len(ms)+2), latest), "", "up", "--dir", dir)
	assertTables(t, s, append([]string{"emails", "goose_db_version"}, jobpipeTables...)...)
	migrate(t, s, 0, fmt.Sprintf("nothing to apply; jobpipe at version %d, app at version 20250102000000\n", latest), "", "up", "--dir", dir)
	migrate(t, s, 0, statusTable(append(jobpipeStatusRows(t, "YYYY-MM-DD hh:mm:ss"),
		[]string{"app", "20250101000000", "YYYY-MM-DD hh:mm:ss", "20250101000000_create_emails.sql"},
		[]string{"app", "20250102000000", "YYYY-MM-DD hh:mm:ss", "20250102000000_email_kind.sql"})...), "", "status", "--dir", dir)
	migrate(t, s, 0, fmt.Sprintf("jobpipe version %d (latest %d)\n", latest, latest)+
		"app version 20250102000000 (latest 20250102000000)\n", "", "version", "--dir", dir)

	// Down takes the application's migrations one at a time and never jobpipe's.
	migrate(t, s, 0, ""+
		"rolled back app 20250102000000_email_kind.sql (Nms)\n"+
		fmt.Sprintf("now jobpipe at version %d, app at version 20250101000000\n", latest), "", "down", "--dir", dir)
	migrate(t, s, 0, ""+
		"rolled back app 20250101000000_create_emails.sql (Nms)\n"+
		fmt.Sprintf("now jobpipe at version %d, app at version 0\n", latest), "", "down", "--dir", dir)
	migrate(t, s, 0, "nothing to roll back: no app migrations are applied\n", "", "down", "--dir", dir)
	assertTables(t, s, append([]string{"goose_db_version"}, jobpipeTables...)...)
}

func TestMigrateFailedMigration(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "20250101000000_broken.sql")
	writeFile(t, file, "-- +goose Up\nCREATE TABLE half_done (id int);\nCREATE TABLE broken (id no_such_type);\n\n-- +goose Down\nDROP TABLE half_done;\n")

	migrate(t, s, 1,
		jobpipeApplied(t),
		"jobpipe: migrations: app migration "+file+` failed (up): ERROR: type "no_such_type" does not exist (SQLSTATE 42704); `+
			"it ran in a transaction, so none of it was applied: fix the file and run up again\n",
		"up", "--dir", dir)
	assertTables(t, s, append([]string{"goose_db_version"}, jobpipeTables...)...)
}

func TestMigrateUnknownVersion(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	migrate(t, s, 0, jobpipeApplied(t)+
		fmt.Sprintf("%s; now jobpipe at version %d\n", appliedCount(len(jobpipeMigrations(t))), jobpipeLatest(t)), "", "up")
	if _, err := s.Pool.Exec(context.Background(), `INSERT INTO jobpipe_db_version (version_id, is_applied) VALUES (99, true)`); err != nil {
		t.Fatal(err)
	}
	const unknown = "jobpipe: migrations: unknown jobpipe version: jobpipe_db_version records 99 as applied, " +
		"but jobpipe's embedded migrations (migrations/sql) has no migration file for it; " +
		"the database was migrated by a newer jobpipe: use that release, or check out the code that wrote it\n"
	migrate(t, s, 1, "", unknown, "up")
	migrate(t, s, 1, "", unknown, "down")
	migrate(t, s, 0, statusTable(append(jobpipeStatusRows(t, "YYYY-MM-DD hh:mm:ss"),
		[]string{"jobpipe", "99", "YYYY-MM-DD hh:mm:ss", "(no file: unknown version)"})...), "", "status")
	assertTables(t, s, jobpipeTables...)
}

func TestMigrateCreate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "db", "migrations")
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	args := []string{"migrate", "create", "add_email_index", "--dir", dir}
	code, stdout, stderr := runWith(t, nil, now, args...)
	path := filepath.Join(dir, "20250304050607_add_email_index.sql")
	check(t, args, code, stdout, stderr, 0, "created "+path+"\n", "")
	if got, _ := os.ReadFile(path); string(got) != "-- +goose Up\n\n\n-- +goose Down\n\n" {
		t.Errorf("created file = %q", got)
	}

	// Through Run, with the real clock, flags before the name.
	code, stdout, stderr = runCLI(t, "migrate", "create", "--dir", dir, "second")
	if code != 0 || stderr != "" || !regexp.MustCompile(`^created `+regexp.QuoteMeta(dir)+`/\d{14}_second\.sql\n$`).MatchString(stdout) {
		t.Errorf("create second: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// The same second again: goose would refuse two migrations with one version, and one older than
	// "second", so the next version after the highest is taken.
	names, _ := filepath.Glob(filepath.Join(dir, "*_second.sql"))
	if len(names) != 1 {
		t.Fatalf("migrations named second: %v", names)
	}
	secondVersion, _ := strconv.ParseInt(strings.SplitN(filepath.Base(names[0]), "_", 2)[0], 10, 64)
	args = []string{"migrate", "create", "other", "--dir", dir}
	code, stdout, stderr = runWith(t, nil, now, args...)
	check(t, args, code, stdout, stderr, 0, fmt.Sprintf("created %s/%d_other.sql\n", dir, secondVersion+1), "")
}

func TestMigrateCommandLineErrors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	writeFile(t, file, "")
	missing := filepath.Join(t.TempDir(), "missing")
	usage := "\n" + migrateUsage
	for _, tc := range []struct {
		args       []string
		wantCode   int
		wantStderr string
	}{
		{[]string{"migrate"}, 2, "jobpipe migrate: missing subcommand; want up, down, status, version or create\n" + usage},
		{[]string{"migrate", "sideways"}, 2, "jobpipe migrate: unknown subcommand \"sideways\"; want up, down, status, version or create\n" + usage},
		{[]string{"migrate", "up", "--bogus"}, 2, "jobpipe migrate up: flag provided but not defined: -bogus\n" + usage},
		{[]string{"migrate", "status", "extra"}, 2, "jobpipe migrate status: unexpected argument \"extra\"; status takes none\n" + usage},
		{[]string{"migrate", "create", "--dir", "d"}, 2, "jobpipe migrate create: missing NAME, e.g. jobpipe migrate create add_email_index --dir db/migrations\n" + usage},
		{[]string{"migrate", "create", "a", "b", "--dir", "d"}, 2, "jobpipe migrate create: unexpected argument \"b\"; create takes one NAME\n" + usage},
		{[]string{"migrate", "create", "add_index"}, 2, "jobpipe migrate create: missing --dir DIR: the directory to write the migration in\n" + usage},
		{
			[]string{"migrate", "create", "Add-Index", "--dir", missing}, 1,
			"jobpipe: migrations: create: the migration name \"Add-Index\" may hold only a-z, 0-9 and _; e.g. add_email_index\n",
		},
		{
			[]string{"migrate", "up", "--database-url", "postgres://%zz"}, 1,
			"jobpipe: the database URL (from --database-url) is malformed: failed to parse as URL (invalid percent-encoded token: \"%zz\"); " +
				"write it as postgres://USER:PASSWORD@HOST:5432/DATABASE?sslmode=disable\n",
		},
		{
			[]string{"migrate", "up", "--database-url", "postgres://127.0.0.1:1/x"}, 1,
			"jobpipe: PostgreSQL at 127.0.0.1:1 is unreachable (URL from --database-url): dial tcp 127.0.0.1:1: connect: connection refused; " +
				"start PostgreSQL at 127.0.0.1:1 or point --database-url or DATABASE_URL at a running server\n",
		},
		{
			[]string{"migrate", "up", "--dir", missing}, 1,
			"jobpipe: --dir " + missing + " does not exist; pass your application's migration directory " +
				"(jobpipe migrate create NAME --dir " + missing + " makes it with a first migration)\n",
		},
		{[]string{"migrate", "status", "--dir", file}, 1, "jobpipe: --dir " + file + " is a file; pass the directory that holds your migrations\n"},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		check(t, tc.args, code, stdout, stderr, tc.wantCode, "", tc.wantStderr)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("a rejected create made %s", missing)
	}
}

// The URL comes from DATABASE_URL when --database-url is not given.
func TestMigrateUsesDatabaseURLFromEnvironment(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	args := []string{"migrate", "version"}
	code, stdout, stderr := runWith(t, map[string]string{"DATABASE_URL": s.URL}, time.Now(), args...)
	check(t, args, code, stdout, stderr, 0, fmt.Sprintf("jobpipe version 0 (latest %d)\n", jobpipeLatest(t)), "")

	code, stdout, stderr = runWith(t, map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/x"}, time.Now(), args...)
	if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "jobpipe: PostgreSQL at 127.0.0.1:1 is unreachable (URL from DATABASE_URL): ") {
		t.Errorf("with an unreachable DATABASE_URL: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
