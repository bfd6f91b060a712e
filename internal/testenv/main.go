package testenv

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// mainRunning is set by Main: containers are only started when Main will terminate them.
var mainRunning atomic.Bool

// Main runs the tests of a package, terminates every container this package started for them,
// then fails the run if goroutines leaked. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// It exits with the tests' code, or 1 when terminating a container failed or goroutines leaked.
func Main(m *testing.M) {
	mainRunning.Store(true)

	code := m.Run()

	stopWatchingInterrupts()
	if err := terminateContainers(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	err := goleak.Find(leakOptions()...)
	if err != nil {
		// go-redis's redial loop checks that its client is closed only between attempts, a second apart.
		time.Sleep(1500 * time.Millisecond)
		err = goleak.Find(leakOptions()...)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: goroutines leaked by the tests:\n%v\n", err)
		if code != 0 {
			fmt.Fprintln(os.Stderr, "testenv: (tests also failed; the leak may be a consequence of a failure)")
		}
		code = 1
	}
	os.Exit(code)
}
