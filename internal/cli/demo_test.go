package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/jobpipe/jobpipe/internal/testenv"
)

func TestDemo(t *testing.T) {
	t.Parallel()
	// The demo drops and recreates the schema it is given; testenv drops it again at the end.
	s := testenv.NewSchema(t)
	r := testenv.NewRedis(t)
	code, stdout, stderr := runCLI(t, "demo", "--schema", s.Name, "--jobs", "400", "--database-url", s.URL,
		"--redis-url", strings.Join(r.Addrs, ","))
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"migrated jobpipe's tables and created 5 kinds: [webhook_delivery blog_post_sync reminder flaky_import poison_report]\n",
		"  webhook_delivery    200 new,   20 re-sent events refused as duplicates (10 customers, at most 3 at once each)\n",
		"  blog_post_sync      116 new,    4 changes to still-waiting posts refused (50 blogs, one at a time, in order)\n",
		"  ok   duplicates refused                   20 + 4 refused; tables hold 200 deliveries and 116 post changes, one per event and post\n",
		"  ok   per-key order kept                   0 blog changes started out of order\n",
		"  ok   retries and failures as configured   20/20 imports processed on attempt 3 (last error kept); 5/5 poison reports failed after 3 attempts with their error\n",
		"  ok   nothing lost, nothing done twice     0 jobs not in their expected final state; 0 jobs completed more than once\n",
		"every promise held (",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
	for _, re := range []string{
		`  ok   no key ever over its limit           at most [123] deliveries of one customer at once \(limit 3\); at most 1 change of one blog \(limit 1\)\n`,
		`  ok   no scheduled job early               0 of 16 reminders started early; the latest started \d+ms after its time\n`,
		`(?m)^\s+\d+\.\ds  processed +\d+/\d+  running +\d+  waiting +\d+  retrying +\d+  failed \d$`,
	} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("demo output does not match %s:\n%s", re, stdout)
		}
	}
}

func TestDemoRefusesBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--jobs", "5"}, {"--schema", "a;b"}, {"extra"}, {"--jobs", "x"}} {
		code, _, stderr := runCLI(t, append([]string{"demo"}, args...)...)
		if code != 2 || !strings.HasPrefix(stderr, "jobpipe demo: ") {
			t.Errorf("demo %q: exit %d, stderr %q; want exit 2 and a usage error", args, code, stderr)
		}
	}
}

// An unreachable lock node is named with what to start, not with a make target of jobpipe's own.
func TestDemoRedisUnreachable(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	args := []string{"demo", "--schema", s.Name, "--database-url", s.URL, "--redis-url", "127.0.0.1:1"}
	code, stdout, stderr := runCLI(t, args...)
	check(t, args, code, stdout, stderr, 1, "",
		"jobpipe: the Redis node at 127.0.0.1:1 does not answer (from --redis-url): dial tcp 127.0.0.1:1: connect: connection refused; "+
			"start Redis at 127.0.0.1:1 or point --redis-url or REDIS_URL at running nodes\n")
}
