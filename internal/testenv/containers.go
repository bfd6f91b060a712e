package testenv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

// containerLabel marks every container this package starts, so that CI (.ci/run) can find any
// left behind by a test process that was killed before Main could terminate them.
const containerLabel = "jobpipe.testenv"

// containerStartTimeout covers pulling an image on a slow network as well as starting it.
const containerStartTimeout = 5 * time.Minute

// containerReadyTimeout is how long a started container's port gets to accept a real client:
// the wait strategies watch the container, not the port forwarding in front of it.
const containerReadyTimeout = 15 * time.Second

// started holds the containers to terminate in Main. Ryuk (testcontainers' reaper) may be off,
// as it must be under Podman without a registry, so nothing else would remove them.
var started struct {
	sync.Mutex
	containers []testcontainers.Container
}

func track(c testcontainers.Container) {
	started.Lock()
	defer started.Unlock()
	started.containers = append(started.containers, c)
	watchInterrupts()
}

// terminateContainers terminates every container this package started.
func terminateContainers() error {
	started.Lock()
	defer started.Unlock()
	var errs []error
	for _, c := range started.containers {
		if err := testcontainers.TerminateContainer(c); err != nil {
			errs = append(errs, fmt.Errorf("testenv: terminate container %s: %w", c.GetContainerID(), err))
		}
	}
	started.containers = nil
	return errors.Join(errs...)
}

// runtimeAnswers reports whether a Docker-compatible container runtime answers, once per process.
var runtimeAnswers = sync.OnceValue(func() (err error) {
	// testcontainers-go panics instead of returning some errors when no runtime is configured.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("no container runtime answers: %v", r)
		}
	}()
	provider, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return fmt.Errorf("no container runtime answers: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := provider.Health(ctx); err != nil { // Health also closes the provider
		return fmt.Errorf("no container runtime answers: %w", err)
	}
	return nil
})

// labels is the customizer that marks our containers.
func labels() testcontainers.CustomizeRequestOption {
	return testcontainers.WithLabels(map[string]string{containerLabel: "true"})
}

// startPostgresContainer starts PostgreSQL from JOBPIPE_TEST_POSTGRES_IMAGE and returns its URL.
func startPostgresContainer(ctx context.Context) (string, error) {
	image := envOr(envPostgresImage, defaultPostgresImage)
	c, err := tcpostgres.Run(ctx, image, tcpostgres.BasicWaitStrategies(), labels())
	if c != nil {
		track(c)
	}
	if err != nil {
		return "", fmt.Errorf("start %s: %w", image, err)
	}
	u, err := c.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		return "", fmt.Errorf("%s: connection string: %w", image, err)
	}
	return u, untilReady(ctx, func(ctx context.Context) error { return pingPostgres(ctx, u) })
}

// startRedisContainer starts Redis from JOBPIPE_TEST_REDIS_IMAGE and returns its one node.
func startRedisContainer(ctx context.Context) ([]string, error) {
	image := envOr(envRedisImage, defaultRedisImage)
	c, err := tcredis.Run(ctx, image, labels())
	if c != nil {
		track(c)
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", image, err)
	}
	u, err := c.ConnectionString(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: connection string: %w", image, err)
	}
	nodes := []string{u}
	return nodes, untilReady(ctx, func(ctx context.Context) error { return pingRedisNodes(ctx, nodes) })
}

// untilReady calls ping until it succeeds or containerReadyTimeout passes.
func untilReady(ctx context.Context, ping func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, containerReadyTimeout)
	defer cancel()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		err := ping(attempt)
		cancelAttempt()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("container started but does not answer: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
