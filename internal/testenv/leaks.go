package testenv

import "go.uber.org/goleak"

// leakOptions are the goroutines that third-party libraries leave running on purpose. Anything
// else still running after the tests is a leak of ours.
func leakOptions() []goleak.Option {
	return []goleak.Option{
		// testcontainers-go keeps one connection to its Ryuk reaper open until the process exits:
		// Ryuk removes the session's containers when that connection drops, so it must outlive
		// the tests. Only present where Ryuk runs (a developer's Docker, not CI's Podman).
		goleak.IgnoreAnyFunction("github.com/testcontainers/testcontainers-go.(*Reaper).connect.func1"),
	}
}
