package integration_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/internal/pgproc"
)

func TestFaultPGCalibrate(t *testing.T) {
	faultScenario(t)
	conc, _ := strconv.Atoi(os.Getenv("CAL_CONC"))
	workers, _ := strconv.Atoi(os.Getenv("CAL_WORKERS"))
	pr, _ := strconv.ParseFloat(os.Getenv("CAL_PLAIN"), 64)
	kr, _ := strconv.ParseFloat(os.Getenv("CAL_KEYED"), 64)
	e := newPGFEnv(t, pgfOptions{workers: workers, concurrency: conc, ledgerElsewhere: os.Getenv("CAL_ELSE") == "1"})
	l := e.startLoad(pr, kr)
	b0 := time.Now()
	for _, step := range []string{"", os.Getenv("CAL_RESTART"), os.Getenv("CAL_RESTART")} {
		if step != "" {
			e.pg.Restart(context.Background(), pgproc.Mode(step))
		}
		time.Sleep(10 * time.Second)
	}
	l.Stop()
	stopped := time.Now()
	d := e.drain(t, 60*time.Second)
	e.logTimeline(t, "plain", pgfPlainKind, b0, stopped.Add(d))
	e.logTimeline(t, "keyed", "", b0, stopped.Add(d))
	mpTerminate(t, e.workers...)
}
