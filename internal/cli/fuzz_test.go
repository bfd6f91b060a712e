package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/limits"
)

// fuzzDatabaseURL is the database the fuzzed commands are given: malformed, so that a command whose
// values were all accepted fails at once, without a network round trip, with malformedURL.
const (
	fuzzDatabaseURL = "postgres://%zz@nowhere/db"
	malformedURL    = "jobpipe: the database URL (from DATABASE_URL) is malformed: "
)

// fuzzRun runs jobpipe in-process with fuzzDatabaseURL and checks what holds for every command line:
// it exits 1 or 2, never 0 (it cannot have done anything), prints nothing on stdout, and a usage error
// (2) is one line about what was wrong followed by the command's usage. It returns the exit code and
// that line (for 1, stderr's first line).
func fuzzRun(t *testing.T, usage string, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{Stdout: &out, Stderr: &errOut, Now: time.Now,
		Getenv: func(k string) string {
			if k == "DATABASE_URL" {
				return fuzzDatabaseURL
			}
			return ""
		}}
	code := run(context.Background(), e, args)
	stderr := errOut.String()
	line, rest, _ := strings.Cut(stderr, "\n")
	switch {
	case out.Len() != 0:
		t.Fatalf("jobpipe %q: exit %d with stdout %q", args, code, out.String())
	case code == exitUsage && rest != "\n"+usage:
		t.Fatalf("jobpipe %q: exit 2, stderr %q; want one line and the usage", args, stderr)
	case code == exitFailure && rest != "":
		t.Fatalf("jobpipe %q: exit 1, stderr %q; want one line", args, stderr)
	case code != exitUsage && code != exitFailure:
		t.Fatalf("jobpipe %q: exit %d, stderr %q", args, code, stderr)
	}
	return code, line
}

// names reports whether msg names value: as written, or quoted (an empty value only quoted).
func names(msg, value string) bool {
	return value != "" && strings.Contains(msg, value) || strings.Contains(msg, strconv.Quote(value))
}

// FuzzEnqueueFlags feeds `jobpipe enqueue` its values: --data, --at, --in and --on-duplicate (the
// kind comes after "--", so any name is a kind name). A command line is refused (exit 2, naming the
// bad value) exactly when a value is wrong by the documented rules: --on-duplicate skip, replace or
// error; --at RFC 3339; --in a duration of 0 or more; not both; --data a JSON object. When every
// value is right, the command goes on to connect (exit 1 on the malformed URL): nothing is refused
// that should not be.
func FuzzEnqueueFlags(f *testing.F) {
	f.Add("webhook", `{"id": 42}`, "", "", "skip")
	f.Add("webhook", `{"id": 42}`, "2026-11-21T18:00:00Z", "", "replace")
	f.Add("webhook", `{"id": 42}`, "", "90s", "error")
	f.Add(`x"; DROP TABLE y; --`, `{}`, "2026-11-21T19:00:00.5+01:00", "", "skip")
	f.Add("k", `[1]`, "", "", "skip")
	f.Add("k", `null`, "", "", "skip")
	f.Add("k", `{"a": 1} x`, "", "", "skip")
	f.Add("k", "", "", "", "skip")
	f.Add("k", `{}`, "yesterday", "", "skip")
	f.Add("k", `{}`, "", "-5s", "skip")
	f.Add("k", `{}`, "", "1fortnight", "skip")
	f.Add("k", `{}`, "2026-11-21T18:00:00Z", "1h", "skip")
	f.Add("k", `{}`, "", "", "merge")
	f.Add("k", `{}`, "", "", "--json")
	f.Fuzz(func(t *testing.T, kind, data, at, in, onDup string) {
		if strings.HasPrefix(data, "@") {
			return // reads a file or standard input: not a value
		}
		args := []string{"enqueue", "--data", data, "--on-duplicate", onDup}
		if at != "" {
			args = append(args, "--at", at)
		}
		if in != "" {
			args = append(args, "--in", in)
		}
		code, line := fuzzRun(t, enqueueUsage, append(args, "--", kind)...)
		var wrong []string // the values a refusal may be about
		if _, ok := enqueueStrategies[onDup]; !ok {
			wrong = append(wrong, onDup)
		}
		if at != "" && in != "" {
			wrong = append(wrong, "--at and --in")
		}
		if _, err := time.Parse(time.RFC3339Nano, at); at != "" && err != nil {
			wrong = append(wrong, at)
		}
		if d, err := time.ParseDuration(in); in != "" && (err != nil || d < 0) {
			wrong = append(wrong, in)
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(data), &obj) != nil || obj == nil {
			wrong = append(wrong, "--data")
		}
		checkRefusal(t, args, code, line, "jobpipe enqueue: ", wrong)
	})
}

// checkRefusal checks that a command line was refused (exit 2, naming one of the wrong values) if
// and only if wrong lists any, and otherwise got as far as connecting.
func checkRefusal(t *testing.T, args []string, code int, line, prefix string, wrong []string) {
	t.Helper()
	if len(wrong) == 0 {
		if code != exitFailure || !strings.HasPrefix(line, malformedURL) {
			t.Fatalf("jobpipe %q: exit %d, %q; every value is right, so it should have tried to connect", args, code, line)
		}
		return
	}
	if code != exitUsage || !strings.HasPrefix(line, prefix) {
		t.Fatalf("jobpipe %q: exit %d, %q; want a usage error about one of %q", args, code, line, wrong)
	}
	for _, w := range wrong {
		if names(line, w) {
			return
		}
	}
	t.Fatalf("jobpipe %q: %q names none of the wrong values %q", args, line, wrong)
}

// FuzzJobsFlags feeds the jobs commands their values: `jobs list KIND` with --state, --limit and
// --before, `jobs retry KIND IDS...` with job ids, and `jobs retry KIND --all-failed` with --progress.
// A value is refused, by name, exactly when it is wrong: a state other than waiting, running,
// processed or failed; a --limit other than a whole number from 1 to 1000; a --before other than a
// whole number of 0 or more; a job id other than a whole number of 1 or more; a --progress other than
// auto, always or never. Numbers are read in base 10, as they are printed.
func FuzzJobsFlags(f *testing.F) {
	f.Add("waiting", "50", "0", "1 2 3", "auto")
	f.Add("done", "0", "-1", "0", "maybe")
	f.Add("", "1001", "7", "abc", "always")
	f.Add("failed", "x", "99999999999999999999", "-5", "never")
	f.Add("Running", "1e3", "1.5", "9223372036854775808", "")
	f.Add("processed", " 5", "+3", "1 1 1", "AUTO")
	f.Fuzz(func(t *testing.T, state, limit, before, ids, progress string) {
		args := []string{"jobs", "list", "--state", state, "--limit", limit, "--before", before, "--", "k"}
		code, line := fuzzRun(t, jobsUsage, args...)
		var wrong []string
		if state != "" && state != "waiting" && state != "running" && state != "processed" && state != "failed" {
			wrong = append(wrong, state)
		}
		if n, err := strconv.ParseInt(limit, 10, 64); err != nil || n < 1 || n > 1000 {
			wrong = append(wrong, limit)
		}
		if n, err := strconv.ParseInt(before, 10, 64); err != nil || n < 0 {
			wrong = append(wrong, before)
		}
		checkRefusal(t, args, code, line, "jobpipe jobs list: ", wrong)

		idArgs := strings.Fields(ids)
		args = append([]string{"jobs", "retry", "--", "k"}, idArgs...)
		code, line = fuzzRun(t, jobsUsage, args...)
		wrong = nil
		for _, id := range idArgs {
			if n, err := strconv.ParseInt(id, 10, 64); err != nil || n < 1 {
				wrong = append(wrong, id)
				break // the first wrong id is named
			}
		}
		if len(idArgs) == 0 {
			wrong = append(wrong, "missing job ids")
		}
		checkRefusal(t, args, code, line, "jobpipe jobs retry: ", wrong)

		args = []string{"jobs", "retry", "--all-failed", "--progress", progress, "--", "k"}
		code, line = fuzzRun(t, jobsUsage, args...)
		wrong = nil
		if progress != "auto" && progress != "always" && progress != "never" {
			wrong = append(wrong, progress)
		}
		checkRefusal(t, args, code, line, "jobpipe jobs retry: ", wrong)
	})
}

// FuzzLimitSet feeds `jobpipe limit set KIND N` its N, and --key or --per-key. N is refused, by name,
// exactly when it is not a whole number from 0 to the limit's maximum; a negative N is refused for
// being negative, not taken for an unknown flag. Any --key value is a key (checked against the kind
// once connected).
func FuzzLimitSet(f *testing.F) {
	f.Add("3", "", false)
	f.Add("0", "acme", false)
	f.Add("-1", "", true)
	f.Add("2147483648", "", false)
	f.Add("2147483647", "", false)
	f.Add("10001", "-1", false)
	f.Add("x", `["acme", 42]`, false)
	f.Add("99999999999999999999", "", true)
	f.Add("-99999999999999999999", "", false)
	f.Add("+7", `x"; DROP TABLE y; --`, false)
	f.Add("", "", false)
	f.Fuzz(func(t *testing.T, n, key string, perKey bool) {
		if strings.HasPrefix(n, "-") && n != "-" && !negativeArg.MatchString(n) {
			return // a flag, not a value of N (-h, --json, --per-key...)
		}
		args := []string{"limit", "set", "k", n}
		maxN := limits.MaxMaxRunning
		switch {
		case key != "":
			args, maxN = append(args, "--key", key), limits.MaxKeyLimit
		case perKey:
			args, maxN = append(args, "--per-key"), limits.MaxKeyLimit
		}
		code, line := fuzzRun(t, limitUsage, args...)
		var wrong []string
		if v, err := strconv.Atoi(n); err != nil || v < 0 || v > maxN {
			wrong = append(wrong, n)
		}
		checkRefusal(t, args, code, line, "jobpipe limit set: ", wrong)
		if len(wrong) > 0 && negativeArg.MatchString(n) && !strings.Contains(line, "is negative") {
			t.Fatalf("limit set %q: %q; want it refused for being negative", n, line)
		}
	})
}

// FuzzParseCounts feeds the bench's count lists ("1,3,5", "10k,1M"). A list is refused, naming the
// part that is wrong, or every count is positive and exactly the number written times its suffix.
func FuzzParseCounts(f *testing.F) {
	for _, s := range []string{"1,3,5", "10k,1M", "", "0", "-1", "1,,2", " 7 , 8k", "1.5k", "k", "9223372036854775807",
		"9223372036854k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		counts, err := parseCounts("--workers", s)
		if err != nil {
			if counts != nil || !strings.HasPrefix(err.Error(), "--workers: ") {
				t.Fatalf("parseCounts(%q) = %v, %v", s, counts, err)
			}
			for _, part := range strings.Split(s, ",") {
				if strings.Contains(err.Error(), strconv.Quote(part)) {
					return
				}
			}
			t.Fatalf("parseCounts(%q) = %v: names no part", s, err)
		}
		if s == "" {
			if counts != nil {
				t.Fatalf("parseCounts(%q) = %v", s, counts)
			}
			return
		}
		parts := strings.Split(s, ",")
		if len(counts) != len(parts) {
			t.Fatalf("parseCounts(%q) = %v: %d counts for %d parts", s, counts, len(counts), len(parts))
		}
		for i, part := range parts {
			p, mult := strings.TrimSpace(part), int64(1)
			switch {
			case strings.HasSuffix(p, "k"):
				p, mult = strings.TrimSuffix(p, "k"), 1_000
			case strings.HasSuffix(p, "M"):
				p, mult = strings.TrimSuffix(p, "M"), 1_000_000
			}
			n, ok := new(big.Int).SetString(p, 10)
			if want := n.Mul(n, big.NewInt(mult)); !ok || counts[i] < 1 || big.NewInt(int64(counts[i])).Cmp(want) != 0 {
				t.Fatalf("parseCounts(%q)[%d] = %d; want %v", s, i, counts[i], want)
			}
		}
	})
}
