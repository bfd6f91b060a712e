package integration_test

import (
	"os"
	"testing"

	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
	"github.com/jobpipe/jobpipe/internal/testenv"
)

func TestMain(m *testing.M) {
	// The multi-process tests re-execute this binary as a worker process (see faultkit.RunWorker).
	if os.Getenv(faultkit.WorkerModeEnv) == "1" {
		os.Exit(faultkit.RunWorker())
	}
	testenv.Main(m)
}
