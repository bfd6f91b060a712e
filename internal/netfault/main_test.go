package netfault_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine is still running after its tests: a closed link must
// leave none behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
