package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Local servers tried when the environment names none.
const (
	localPostgresURL = "postgres://127.0.0.1:5432/postgres?sslmode=disable"
	localRedisAddr   = "127.0.0.1:6379"
)

// localProbeTimeout is how long a local server gets to answer before the next way is tried.
const localProbeTimeout = 2 * time.Second

// envProbeTimeout is how long a server named in the environment gets to answer: it is not
// replaced by another way, so it gets longer than a local one.
const envProbeTimeout = 10 * time.Second

// Each service is found once per process and only when a test first asks for it, so a package
// that needs only Redis never starts a PostgreSQL container. A failure is kept and reported to
// every test that asks.
var (
	postgresOnce = sync.OnceValues(func() (string, error) { return discover(postgresFinder) })
	redisOnce    = sync.OnceValues(func() ([]string, error) { return discover(redisFinder) })
)

// postgresURL returns the connection string of the PostgreSQL server for tests, or fails t.
func postgresURL(t testing.TB) string {
	t.Helper()
	u, err := postgresOnce()
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// redisNodes returns the Redis nodes for tests, or fails t.
func redisNodes(t testing.TB) []string {
	t.Helper()
	nodes, err := redisOnce()
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// finder knows how to find one service in each way.
type finder[T any] struct {
	service string                                 // "PostgreSQL" or "Redis"
	envVar  string                                 // the variable that names the server
	env     func(context.Context) (T, bool, error) // bool: the variable is set
	local   func(context.Context) (T, error)       // probe the default port
	start   func(context.Context) (T, error)       // start a container
	show    func(T) string                         // for the log line, without passwords
}

// discover tries the ways JOBPIPE_TEST_SERVERS allows, in order, and logs the one chosen.
func discover[T any](f finder[T]) (T, error) {
	var zero T
	ways, err := waysFor(os.Getenv(envServers))
	if err != nil {
		return zero, err
	}
	var tried []string
	for _, w := range ways {
		var (
			v    T
			err  error
			what string
		)
		switch w {
		case wayEnv:
			var set bool
			ctx, cancel := context.WithTimeout(context.Background(), envProbeTimeout)
			v, set, err = f.env(ctx)
			cancel()
			what = "the environment"
			if set && err != nil {
				// The developer named a server: falling back to another one would hide the mistake.
				return zero, fmt.Errorf("testenv: %s is set, but that %s server does not work: %w", f.envVar, f.service, err)
			}
		case wayLocal:
			ctx, cancel := context.WithTimeout(context.Background(), localProbeTimeout)
			v, err = f.local(ctx)
			cancel()
			what = "a local server"
		case wayContainers:
			v, err = startWithRuntime(f.start)
			what = "a testcontainers container"
		}
		if err == nil {
			fmt.Fprintf(os.Stderr, "testenv: %s from %s (%s=%s): %s\n", f.service, what, envServers, modeName(), f.show(v))
			return v, nil
		}
		tried = append(tried, fmt.Sprintf("  - %s: %v", what, err))
	}
	return zero, notFound(f.service, tried)
}

// containerStarts makes container starts take turns. The PostgreSQL and Redis services are
// discovered independently, so parallel tests asking for both at once would start both containers
// at once, and testcontainers creates its default network on a container's first start without
// locking: the second creation fails with "network ... already exists", and the failure is
// remembered for the whole run.
var containerStarts sync.Mutex

// startWithRuntime starts a container when a container runtime answers and Main will terminate
// what it starts.
func startWithRuntime[T any](start func(context.Context) (T, error)) (T, error) {
	var zero T
	if !mainRunning.Load() {
		return zero, errors.New("not used: the test package's TestMain must call testenv.Main, which terminates the containers")
	}
	containerStarts.Lock()
	defer containerStarts.Unlock()
	if err := runtimeAnswers(); err != nil {
		return zero, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), containerStartTimeout)
	defer cancel()
	return start(ctx)
}

// notFound is the one message a test gets when no way worked: what was tried, and the three
// ways to give the tests servers.
func notFound(service string, tried []string) error {
	return fmt.Errorf(`testenv: no %s server for the tests (%s=%s). Tried:
%s
Give the tests servers in one of these ways:
  1. set %s (PostgreSQL connection URL) and %s (Redis nodes, comma-separated host:port or redis://host:port/db);
  2. run PostgreSQL on %s and Redis on %s, as the OS user with no password ("make services" starts or installs them);
  3. start Docker or Podman, so that testcontainers-go can run %s and %s (images from %s and %s)`,
		service, envServers, modeName(), strings.Join(tried, "\n"),
		envDatabaseURL, envRedisURL,
		"127.0.0.1:5432", localRedisAddr,
		envOr(envPostgresImage, defaultPostgresImage), envOr(envRedisImage, defaultRedisImage),
		envPostgresImage, envRedisImage)
}

// Servers returns the test PostgreSQL server's connection string and the test Redis nodes, found as
// for every test. It is for code that has no testing.TB, such as runnable examples; tests use
// NewSchema and NewRedis, which also isolate them.
func Servers() (postgresURL string, redisNodes []string, err error) {
	if postgresURL, err = postgresOnce(); err != nil {
		return "", nil, err
	}
	redisNodes, err = redisOnce()
	return postgresURL, redisNodes, err
}
