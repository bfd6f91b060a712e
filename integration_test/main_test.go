package integration_test

import (
	"os"
	"testing"

	"github.com/jobpipe/jobpipe/internal/testenv"
)

func TestMain(m *testing.M) {
	// The multi-process tests re-execute this binary as a worker process (see worker_main_test.go).
	if os.Getenv(mpWorkerEnv) == "1" {
		os.Exit(runWorker())
	}
	testenv.Main(m)
}
