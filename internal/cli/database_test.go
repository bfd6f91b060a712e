package cli

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/migrations"
)

// runFallback runs jobpipe with vars as its environment and fallback as the default database URL, so
// that the fallback can be tried on a test's own schema.
func runFallback(t *testing.T, vars map[string]string, fallback string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] }, Now: time.Now,
		defaultDatabaseURL: fallback}
	code = run(context.Background(), e, args)
	return code, out.String(), errOut.String()
}

// databaseText is how messages name s's database.
func databaseText(t *testing.T, s *testenv.Schema) string {
	t.Helper()
	var name string
	if err := s.Pool.QueryRow(context.Background(), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	cfg := s.Config().ConnConfig
	return fmt.Sprintf("database %q, schema %q, on %s:%d", name, s.Name, cfg.Host, cfg.Port)
}

// Every command that finds jobpipe's tables missing says in which database it looked, and how it
// chose it.
func TestTablesMissingNamesTheDatabase(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t) // not migrated
	db := databaseText(t, s)
	fallback := "jobpipe: jobpipe's tables are missing in " + db + " (the default URL, as neither --database-url nor DATABASE_URL is set): " +
		"run \"jobpipe migrate up\" on it, or point --database-url or DATABASE_URL at your application's database\n"
	fromEnv := "jobpipe: jobpipe's tables are missing in " + db + " (URL from DATABASE_URL): run \"jobpipe migrate up\" on it\n"
	using := "using " + db + " (the default URL, as neither --database-url nor DATABASE_URL is set)\n"
	for _, tc := range []struct {
		args                   []string
		wantStdout, wantStderr string // with the fallback URL
	}{
		{[]string{"kinds"}, using, fallback},
		{[]string{"kinds", "--json"}, "", using + fallback}, // stdout stays JSON
		{[]string{"jobs", "list", "webhook"}, "", fallback},
		{[]string{"limit", "list"}, "", fallback},
		{[]string{"limit", "get", "webhook"}, "", fallback},
		{[]string{"pause", "webhook"}, "", fallback},
		{[]string{"cron", "list"}, "", fallback},
		{[]string{"prune"}, "", fallback},
		{[]string{"enqueue", "webhook", "--data", "{}"}, "", fallback},
	} {
		code, stdout, stderr := runFallback(t, nil, s.URL, tc.args...)
		check(t, tc.args, code, stdout, stderr, 1, tc.wantStdout, tc.wantStderr)
		code, stdout, stderr = runFallback(t, map[string]string{"DATABASE_URL": s.URL}, "postgres://127.0.0.1:1/unused", tc.args...)
		check(t, tc.args, code, stdout, stderr, 1, "", fromEnv)
	}
}

// "jobpipe kinds" names the fallback database on its first line, and with no kinds says how kinds
// get registered, the application's migrations included.
func TestKindsNamesTheFallbackDatabase(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	if err := migrations.Up(context.Background(), s.Pool); err != nil {
		t.Fatal(err)
	}
	const none = "no kinds are registered: a dispatcher registers its kinds when it starts, and a migration written by " +
		"\"jobpipe kind new\" registers its kind when applied (\"jobpipe migrate up --dir DIR\" applies your application's migrations in DIR)\n"
	using := "using " + databaseText(t, s) + " (the default URL, as neither --database-url nor DATABASE_URL is set)\n"
	code, stdout, stderr := runFallback(t, nil, s.URL, "kinds")
	check(t, []string{"kinds"}, code, stdout, stderr, 0, using+none, "")
	code, stdout, stderr = runFallback(t, nil, s.URL, "kinds", "--json")
	check(t, []string{"kinds", "--json"}, code, stdout, stderr, 0, "[]\n", using)
	code, stdout, stderr = runFallback(t, nil, "postgres://127.0.0.1:1/unused", "kinds", "--database-url", s.URL)
	check(t, []string{"kinds", "--database-url", s.URL}, code, stdout, stderr, 0, none, "")
}
