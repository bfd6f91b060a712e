package cli

import (
	"strings"
	"testing"

	"github.com/jobpipe/jobpipe/internal/testenv"
)

func TestDemo(t *testing.T) {
	t.Parallel()
	// The demo drops and recreates the schema it is given; testenv drops it again at the end.
	s := testenv.NewSchema(t)
	code, stdout, stderr := runCLI(t, "demo", "--schema", s.Name, "--jobs", "200", "--customers", "4", "--database-url", s.URL)
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"schema " + s.Name + ": jobpipe's tables migrated, kind webhook_delivery created and checked\n",
		": 180 new, 20 duplicates skipped, 18 new ones scheduled in 1h\n",
		"debounce: job 201 replaced in place (body now {\"v\":2}, due 10s after enqueue); the error strategy said: " +
			"uniqueness: kind \"webhook_delivery\" already has waiting job 201 with the same unique fields\n",
		"         0       51          6   evt-000000  evt-debounce\n",
		"verified: one waiting row per event, every duplicate resolved to it, scheduled rows not due",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestDemoRefusesBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--jobs", "5"}, {"--schema", "a;b"}, {"--customers", "0"}, {"extra"}} {
		code, _, stderr := runCLI(t, append([]string{"demo"}, args...)...)
		if code != 2 || !strings.HasPrefix(stderr, "jobpipe demo: ") {
			t.Errorf("demo %q: exit %d, stderr %q; want exit 2 and a usage error", args, code, stderr)
		}
	}
}
