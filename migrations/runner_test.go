package migrations_test

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/migrations"
)

// setup gives a test its own schema and a *sql.DB on it.
func setup(t *testing.T) (*testenv.Schema, *sql.DB) {
	t.Helper()
	s := testenv.NewSchema(t)
	db := stdlib.OpenDBFromPool(s.Pool)
	t.Cleanup(func() { db.Close() })
	return s, db
}

func newRunner(t *testing.T, db *sql.DB, dir string) *migrations.Runner {
	t.Helper()
	r, err := migrations.NewRunner(context.Background(), db, dir)
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	return r
}

// writeDir writes files (name to content) into a new directory and returns it.
func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// summary drops durations, which vary, so results compare exactly.
func summary(rs []migrations.Result) []migrations.Result {
	out := make([]migrations.Result, len(rs))
	for i, r := range rs {
		r.Duration = 0
		out[i] = r
	}
	return out
}

func assertTables(t *testing.T, s *testenv.Schema, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := tables(t, s); !slices.Equal(got, want) {
		t.Fatalf("tables = %q, want %q", got, want)
	}
}

func TestUpCreatesJobpipeTablesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)

	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatalf("Up: %v", err)
	}
	assertTables(t, s, jobpipeTables...)

	res, err := newRunner(t, db, "").Up(ctx)
	if err != nil {
		t.Fatalf("second Up: %v", err)
	}
	if len(res) != 0 {
		t.Fatalf("second Up applied %v, want nothing", summary(res))
	}
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatalf("third Up: %v", err)
	}
	assertTables(t, s, jobpipeTables...)
}

func TestDownRollsBackJobpipe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	r := newRunner(t, db, "")

	res, err := r.Down(ctx)
	if err != nil || res != nil {
		t.Fatalf("Down on an empty schema = %v, %v; want nil, nil", res, err)
	}
	assertTables(t, s) // reading did not create the version table

	if _, err := r.Up(ctx); err != nil {
		t.Fatal(err)
	}
	// Down rolls back jobpipe's latest migration, then the one before it, down to none.
	ms := jobpipeMigrations(t)
	for i := len(ms) - 1; i >= 0; i-- {
		res, err = r.Down(ctx)
		if err != nil {
			t.Fatalf("Down: %v", err)
		}
		want := jobpipeResults(ms[i : i+1])[0]
		if res == nil || summary([]migrations.Result{*res})[0] != want {
			t.Fatalf("Down = %+v, want %+v", res, want)
		}
		assertTables(t, s, tablesThrough(ms[:i])...)
	}

	res, err = r.Down(ctx)
	if err != nil || res != nil {
		t.Fatalf("second Down = %v, %v; want nil, nil", res, err)
	}
}

func TestStatusAndVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	r := newRunner(t, db, "")

	st, err := r.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ms := jobpipeMigrations(t)
	var want []migrations.MigrationStatus
	for _, m := range ms {
		want = append(want, migrations.MigrationStatus{Source: migrations.SourceJobpipe, Version: m.Version, File: m.File})
	}
	if !slices.Equal(st, want) {
		t.Fatalf("Status before up = %+v, want %+v", st, want)
	}
	v, err := r.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantV := []migrations.SourceVersion{{Source: migrations.SourceJobpipe, Table: migrations.VersionTable, Current: 0, Latest: jobpipeLatest(t).Version}}
	if !slices.Equal(v, wantV) {
		t.Fatalf("Version before up = %+v, want %+v", v, wantV)
	}
	assertTables(t, s)

	if _, err := r.Up(ctx); err != nil {
		t.Fatal(err)
	}
	st, err = r.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i].Applied = true
	}
	got := slices.Clone(st)
	for i := range got {
		if got[i].AppliedAt.IsZero() {
			t.Errorf("Status after up: %s applied at the zero time", got[i].File)
		}
		got[i].AppliedAt = time.Time{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Status after up = %+v, want %+v applied", st, want)
	}
	v, err = r.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantV[0].Current = jobpipeLatest(t).Version
	if !slices.Equal(v, wantV) {
		t.Fatalf("Version after up = %+v, want %+v", v, wantV)
	}
}

// The application's tables refer to jobpipe's, so up must apply jobpipe's first and down must
// roll back the application's only.
func TestAppDirRunsAfterJobpipe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	dir := writeDir(t, map[string]string{
		"20250101000000_create_emails.sql": `-- +goose Up
CREATE TABLE emails (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, address text NOT NULL);
INSERT INTO jobpipe_kinds (name, table_name) VALUES ('emails', 'emails');

-- +goose Down
DELETE FROM jobpipe_kinds WHERE name = 'emails';
DROP TABLE emails;
`,
		"20250102000000_email_kind.sql": `-- +goose Up
ALTER TABLE emails ADD COLUMN kind text NOT NULL DEFAULT 'emails' REFERENCES jobpipe_kinds (name);

-- +goose Down
ALTER TABLE emails DROP COLUMN kind;
`,
		"README.md": "not a migration",
	})
	r := newRunner(t, db, dir)

	res, err := r.Up(ctx)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	ms := jobpipeMigrations(t)
	want := append(jobpipeResults(ms),
		migrations.Result{Source: migrations.SourceApp, Version: 20250101000000, File: "20250101000000_create_emails.sql"},
		migrations.Result{Source: migrations.SourceApp, Version: 20250102000000, File: "20250102000000_email_kind.sql"},
	)
	if got := summary(res); !slices.Equal(got, want) {
		t.Fatalf("Up = %+v, want %+v", got, want)
	}
	assertTables(t, s, append([]string{"emails", migrations.AppVersionTable}, jobpipeTables...)...)

	st, err := r.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range st {
		got = append(got, m.Source+" "+m.File)
		if !m.Applied {
			t.Errorf("%s %s not applied", m.Source, m.File)
		}
	}
	var wantSt []string
	for _, m := range ms {
		wantSt = append(wantSt, "jobpipe "+m.File)
	}
	wantSt = append(wantSt, "app 20250101000000_create_emails.sql", "app 20250102000000_email_kind.sql")
	if !slices.Equal(got, wantSt) {
		t.Fatalf("Status = %q, want %q", got, wantSt)
	}

	for _, wantDown := range []string{"20250102000000_email_kind.sql", "20250101000000_create_emails.sql", ""} {
		res, err := r.Down(ctx)
		if err != nil {
			t.Fatalf("Down: %v", err)
		}
		if gotDown := ""; res != nil {
			gotDown = res.File
			if res.Source != migrations.SourceApp || gotDown != wantDown {
				t.Fatalf("Down rolled back %s %s, want app %s", res.Source, gotDown, wantDown)
			}
		} else if wantDown != "" {
			t.Fatalf("Down rolled back nothing, want %s", wantDown)
		}
	}
	assertTables(t, s, append([]string{migrations.AppVersionTable}, jobpipeTables...)...)
}

func TestCreatedMigrationRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := setup(t)
	dir := t.TempDir()
	if _, err := migrations.Create(dir, "nothing_yet", time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	res, err := newRunner(t, db, dir).Up(ctx)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	want := append(jobpipeResults(jobpipeMigrations(t)),
		migrations.Result{Source: migrations.SourceApp, Version: 20250101000000, File: "20250101000000_nothing_yet.sql"})
	if got := summary(res); !slices.Equal(got, want) {
		t.Fatalf("Up = %+v, want jobpipe's then the created migration: %+v", got, want)
	}
}

func TestEmptyAppDirAppliesJobpipeOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	r := newRunner(t, db, t.TempDir())
	res, err := r.Up(ctx)
	if want := jobpipeResults(jobpipeMigrations(t)); err != nil || !slices.Equal(summary(res), want) {
		t.Fatalf("Up = %+v, %v; want jobpipe's migrations %+v", summary(res), err, want)
	}
	if res, err := r.Down(ctx); res != nil || err != nil {
		t.Fatalf("Down = %+v, %v; want nothing to roll back", res, err)
	}
	assertTables(t, s, jobpipeTables...) // no app migration ran, so no app version table either
}

func TestUnknownJobpipeVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	r := newRunner(t, db, "")
	if _, err := r.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `INSERT INTO jobpipe_db_version (version_id, is_applied) VALUES (99, true)`); err != nil {
		t.Fatal(err)
	}

	const want = "migrations: unknown jobpipe version: jobpipe_db_version records 99 as applied, " +
		"but jobpipe's embedded migrations (migrations/sql) has no migration file for it; " +
		"the database was migrated by a newer jobpipe: use that release, or check out the code that wrote it"
	for name, run := range map[string]func() error{
		"up":   func() error { _, err := r.Up(ctx); return err },
		"down": func() error { _, err := r.Down(ctx); return err },
	} {
		err := run()
		var uv *migrations.UnknownVersionError
		if !errors.As(err, &uv) || !slices.Equal(uv.Versions, []int64{99}) {
			t.Fatalf("%s: err = %v, want an UnknownVersionError for 99", name, err)
		}
		if err.Error() != want {
			t.Fatalf("%s: err =\n%s\nwant\n%s", name, err, want)
		}
	}
	assertTables(t, s, jobpipeTables...) // down rolled back nothing

	st, err := r.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ms := jobpipeMigrations(t)
	ok := len(st) == len(ms)+1
	for i, m := range ms {
		ok = ok && st[i].Source == migrations.SourceJobpipe && st[i].Version == m.Version && st[i].File == m.File && st[i].Applied
	}
	if !ok || st[len(ms)].Source != migrations.SourceJobpipe || st[len(ms)].Version != 99 || st[len(ms)].File != "" || !st[len(ms)].Applied {
		t.Fatalf("Status = %+v, want jobpipe's migrations %+v applied and the unknown 99", st, ms)
	}
}

// An unknown application version must stop up before jobpipe's migrations are applied.
func TestUnknownAppVersionAppliesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	dir := writeDir(t, map[string]string{"20250101000000_a.sql": "-- +goose Up\nCREATE TABLE a (id int);\n-- +goose Down\nDROP TABLE a;\n"})
	// As goose creates it, recording a version from code this directory does not have.
	if _, err := s.Pool.Exec(ctx, `
CREATE TABLE goose_db_version (
	id integer PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,
	version_id bigint NOT NULL,
	is_applied boolean NOT NULL,
	tstamp timestamp NOT NULL DEFAULT now()
);
INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, true), (20990101000000, true), (20990202000000, true);
`); err != nil {
		t.Fatal(err)
	}

	_, err := newRunner(t, db, dir).Up(ctx)
	want := "migrations: unknown app versions: goose_db_version records 20990101000000, 20990202000000 as applied, " +
		"but " + dir + " has no migration file for them; check out the code that wrote them (or pass the directory that holds them)"
	if err == nil || err.Error() != want {
		t.Fatalf("Up err =\n%v\nwant\n%s", err, want)
	}
	assertTables(t, s, migrations.AppVersionTable)
}

func TestFailedMigrationNamesTheFile(t *testing.T) {
	t.Parallel()
	const file = "20250101000000_broken.sql"
	for _, tc := range []struct {
		name       string
		header     string
		noTx       bool
		wantTables []string // besides jobpipe's and goose_db_version
		wantText   string
	}{
		{name: "transaction", wantText: "it ran in a transaction, so none of it was applied"},
		{
			name: "no transaction", header: "-- +goose NO TRANSACTION\n", noTx: true,
			wantTables: []string{"half_done"}, wantText: "the database may need manual repair",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, db := setup(t)
			dir := writeDir(t, map[string]string{file: tc.header + `-- +goose Up
CREATE TABLE half_done (id int);
CREATE TABLE broken (id no_such_type);

-- +goose Down
DROP TABLE half_done;
`})
			res, err := newRunner(t, db, dir).Up(ctx)
			var me *migrations.MigrationError
			if !errors.As(err, &me) {
				t.Fatalf("Up err = %v, want a MigrationError", err)
			}
			wantErr := migrations.MigrationError{
				Source: migrations.SourceApp, File: filepath.Join(dir, file), Direction: "up", NoTransaction: tc.noTx,
			}
			me2 := *me
			me2.Err = nil
			if me2 != wantErr {
				t.Fatalf("MigrationError = %+v, want %+v", me2, wantErr)
			}
			for _, part := range []string{filepath.Join(dir, file), `type "no_such_type" does not exist`, tc.wantText} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not contain %q", err, part)
				}
			}
			if want := jobpipeResults(jobpipeMigrations(t)); !slices.Equal(summary(res), want) {
				t.Errorf("applied before the failure = %+v, want jobpipe's: %+v", summary(res), want)
			}
			assertTables(t, s, append(append([]string{migrations.AppVersionTable}, jobpipeTables...), tc.wantTables...)...)
		})
	}
}

func TestConcurrentUpAppliesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)

	const runs = 4
	var wg sync.WaitGroup
	applied := make([][]migrations.Result, runs)
	errs := make([]error, runs)
	for i := range runs {
		wg.Go(func() {
			r, err := migrations.NewRunner(ctx, db, "")
			if err != nil {
				errs[i] = err
				return
			}
			res, err := r.Up(ctx)
			applied[i], errs[i] = summary(res), err
		})
	}
	wg.Wait()
	var all []migrations.Result
	for i := range runs {
		if errs[i] != nil {
			t.Errorf("run %d: %v", i, errs[i])
		}
		all = append(all, applied[i]...)
	}
	// Each of jobpipe's migrations is applied by exactly one run.
	slices.SortStableFunc(all, func(a, b migrations.Result) int { return cmp.Compare(a.Version, b.Version) })
	if want := jobpipeResults(jobpipeMigrations(t)); !slices.Equal(all, want) {
		t.Fatalf("migrations applied across %d runs = %+v, want each of jobpipe's once: %+v", runs, all, want)
	}
	assertTables(t, s, jobpipeTables...)
}
