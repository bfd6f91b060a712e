package testenv

import (
	"slices"
	"strings"
	"testing"
)

func TestWaysFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode string
		want []way
	}{
		{"", []way{wayEnv, wayLocal, wayContainers}},
		{"auto", []way{wayEnv, wayLocal, wayContainers}},
		{"env", []way{wayEnv}},
		{" Local ", []way{wayLocal}},
		{"containers", []way{wayContainers}},
	}
	for _, tt := range tests {
		got, err := waysFor(tt.mode)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("waysFor(%q) = %v, %v; want %v", tt.mode, got, err, tt.want)
		}
	}
	if _, err := waysFor("docker"); err == nil || !strings.Contains(err.Error(), envServers) {
		t.Errorf("waysFor(docker): err = %v, want one naming %s", err, envServers)
	}
}

func TestNotFoundNamesTheThreeWays(t *testing.T) {
	t.Parallel()
	msg := notFound("PostgreSQL", []string{"  - the environment: TEST_DATABASE_URL is not set"}).Error()
	for _, want := range []string{"TEST_DATABASE_URL", "TEST_REDIS_URL", "make services", "127.0.0.1:5432", "127.0.0.1:6379", "Docker or Podman", "is not set"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message does not mention %q:\n%s", want, msg)
		}
	}
}
