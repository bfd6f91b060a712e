package cli

import (
	"bytes"
	"context"
	"flag"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// runCLI runs jobpipe in-process through Run and returns the exit code and both outputs.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// runWith runs jobpipe in-process with the environment variables in vars and the clock stopped at now.
func runWith(t *testing.T, vars map[string]string, now time.Time, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] }, Now: func() time.Time { return now }}
	code = run(context.Background(), e, args)
	return code, out.String(), errOut.String()
}

// check compares a run's results with the expected ones exactly.
func check(t *testing.T, args []string, code int, stdout, stderr string, wantCode int, wantStdout, wantStderr string) {
	t.Helper()
	if code != wantCode || stdout != wantStdout || stderr != wantStderr {
		t.Errorf("jobpipe %q\n got: exit %d\nstdout:\n%s\nstderr:\n%s\nwant: exit %d\nstdout:\n%s\nstderr:\n%s",
			args, code, stdout, stderr, wantCode, wantStdout, wantStderr)
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{args: nil, wantCode: 2, wantStderr: mainUsage()},
		{args: []string{"help"}, wantStdout: mainUsage()},
		{args: []string{"-h"}, wantStdout: mainUsage()},
		{args: []string{"--help"}, wantStdout: mainUsage()},
		{args: []string{"help", "migrate"}, wantStdout: migrateUsage},
		{args: []string{"migrate", "-h"}, wantStdout: migrateUsage},
		{args: []string{"migrate", "status", "-h"}, wantStdout: migrateUsage},
		{
			args: []string{"help", "nosuch"}, wantCode: 2,
			wantStderr: "jobpipe help: unknown command \"nosuch\"; run \"jobpipe help\" for the list\n\n" + commands["help"].usage,
		},
		{
			args: []string{"nosuch"}, wantCode: 2,
			wantStderr: "jobpipe: unknown command \"nosuch\"\n\n" + mainUsage(),
		},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		check(t, tc.args, code, stdout, stderr, tc.wantCode, tc.wantStdout, tc.wantStderr)
	}
}

func TestMainUsageListsCommands(t *testing.T) {
	t.Parallel()
	u := mainUsage()
	for _, re := range []string{
		`^usage: jobpipe <command> \[arguments\]\n`,
		`(?m)^  help +show this help, or a command's usage$`,
		`(?m)^  migrate +apply, roll back and report jobpipe's and your application's migrations$`,
	} {
		if !regexp.MustCompile(re).MatchString(u) {
			t.Errorf("usage does not match %s:\n%s", re, u)
		}
	}
}

func TestParseFlagsAllowsFlagsAfterArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		wantPos []string
		wantDir string
	}{
		{args: []string{"name", "--dir", "d"}, wantPos: []string{"name"}, wantDir: "d"},
		{args: []string{"--dir=d", "a", "b"}, wantPos: []string{"a", "b"}, wantDir: "d"},
		{args: []string{"a", "--", "--dir", "b"}, wantPos: []string{"a", "--dir", "b"}},
		{args: nil},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		dir := fs.String("dir", "", "")
		pos, err := parseFlags(fs, tc.args)
		if err != nil || !slices.Equal(pos, tc.wantPos) || *dir != tc.wantDir {
			t.Errorf("parseFlags(%q) = %q, dir %q, %v; want %q, dir %q", tc.args, pos, *dir, err, tc.wantPos, tc.wantDir)
		}
	}
}
