package testenv

import (
	"fmt"
	"os"
	"strings"
)

// Environment variables this package reads (see the package documentation).
const (
	envDatabaseURL   = "TEST_DATABASE_URL"
	envRedisURL      = "TEST_REDIS_URL"
	envServers       = "JOBPIPE_TEST_SERVERS"
	envPostgresImage = "JOBPIPE_TEST_POSTGRES_IMAGE"
	envRedisImage    = "JOBPIPE_TEST_REDIS_IMAGE"
)

// Images used when the environment names none: small, and what a developer with Docker most
// likely has already.
const (
	defaultPostgresImage = "postgres:16-alpine"
	defaultRedisImage    = "redis:7-alpine"
)

// way is one way of finding a server for the tests.
type way string

const (
	wayEnv        way = "env"
	wayLocal      way = "local"
	wayContainers way = "containers"
)

// waysFor turns the value of JOBPIPE_TEST_SERVERS into the ways to try, in order.
func waysFor(mode string) ([]way, error) {
	switch strings.ToLower(strings.TrimSpace(mode)) {
	case "", "auto":
		return []way{wayEnv, wayLocal, wayContainers}, nil
	case "env":
		return []way{wayEnv}, nil
	case "local":
		return []way{wayLocal}, nil
	case "containers":
		return []way{wayContainers}, nil
	}
	return nil, fmt.Errorf("testenv: %s=%q: want auto, env, local or containers", envServers, mode)
}

// modeName is JOBPIPE_TEST_SERVERS as the messages show it.
func modeName() string {
	if m := strings.TrimSpace(os.Getenv(envServers)); m != "" {
		return m
	}
	return "auto"
}

// envOr returns the value of the environment variable key, or def when it is unset or empty.
func envOr(key, def string) string {
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		return v
	}
	return def
}
