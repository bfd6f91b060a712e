//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

// The meter reads /proc as jobpipe's bench does, and jobpipe's tests check it against getrusage and
// the clock; this checks what the two must share to compare: the machine's busy and total times.

// tick is the kernel's clock tick for /proc's times.
const tick = 10 * time.Millisecond

func TestReadMachineTimesFields(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	proc, err := procfs.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	write := func(stat string) {
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// user nice system idle iowait irq softirq steal guest guest_nice, in ticks
	write("cpu  100 5 50 1000 20 3 2 1 7 0\ncpu0 50 2 25 500 10 1 1 0 0 0\nintr 1 2\nbtime 1700000000\n")
	m, err := readMachineTimes(proc)
	want := machineTimes{busy: (100 + 5 + 50 + 3 + 2 + 1) * tick, all: (161 + 1000 + 20) * tick}
	if err != nil || m != want {
		t.Errorf("readMachineTimes = %+v, %v; want %+v", m, err, want)
	}
	write("btime 1700000000\n")
	if m, err := readMachineTimes(proc); err == nil {
		t.Errorf("no cpu line: %+v, no error", m)
	}
}
