//go:build linux

package bench

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

// tick is the kernel's clock tick for /proc's times; utime and stime are each cut to it.
const tick = 10 * time.Millisecond

// testStarted is when the test binary initialised its packages, moments after it started.
var testStarted = time.Now()

func testProcFS(t *testing.T) procfs.FS {
	t.Helper()
	proc, err := procfs.NewDefaultFS()
	if err != nil {
		t.Fatal(err)
	}
	return proc
}

// rusageCPU is this process's user and system time as getrusage reports it, to the microsecond: the
// kernel's own figure, without /proc or procfs.
func rusageCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// spin keeps a core busy until this process has used d more CPU time.
func spin(t *testing.T, d time.Duration) {
	t.Helper()
	from, deadline := rusageCPU(t), time.Now().Add(30*time.Second)
	for rusageCPU(t)-from < d {
		if time.Now().After(deadline) {
			t.Fatalf("the process did not use %v of CPU time in 30 s", d)
		}
	}
}

func TestReadProcTimes(t *testing.T) {
	t.Parallel()
	proc := testProcFS(t)
	r0 := rusageCPU(t)
	before, err := readProcTimes(proc, 0)
	if err != nil {
		t.Fatal(err)
	}
	r1 := rusageCPU(t)
	spin(t, 200*time.Millisecond)
	r2 := rusageCPU(t)
	after, err := readProcTimes(proc, 0)
	if err != nil {
		t.Fatal(err)
	}
	r3 := rusageCPU(t)

	// /proc agrees with getrusage, less up to a tick each for utime and stime.
	if before.cpu < r0-2*tick || before.cpu > r1 {
		t.Errorf("CPU time %v, want %v to %v (getrusage before and after)", before.cpu, r0-2*tick, r1)
	}
	if after.cpu < r2-2*tick || after.cpu > r3 {
		t.Errorf("CPU time %v after the spin, want %v to %v (getrusage before and after)", after.cpu, r2-2*tick, r3)
	}
	if grew := after.cpu - before.cpu; grew < 100*time.Millisecond {
		t.Errorf("CPU time grew by %v over a spin of 200ms", grew)
	}

	// The kernel keeps the executable's name as exec was given it, cut to 15 bytes.
	want := filepath.Base(os.Args[0])
	want = want[:min(len(want), 15)]
	if after.stat.Comm != want {
		t.Errorf("name %q, want %q", after.stat.Comm, want)
	}

	started, err := after.started()
	if err != nil {
		t.Fatal(err)
	}
	s, err := proc.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if boot := time.Unix(int64(s.BootTime), 0); started.Before(boot) || started.After(time.Now()) {
		t.Errorf("started %v, want between the boot (%v) and now", started, boot)
	}
	if d := absDuration(started.Sub(testStarted)); d > startTolerance {
		t.Errorf("started %v, %v from when the test binary initialised (%v)", started, d, testStarted)
	}
}

func TestReadMachineTimes(t *testing.T) {
	t.Parallel()
	proc := testProcFS(t)
	s, err := proc.Stat()
	if err != nil {
		t.Fatal(err)
	}
	cores := time.Duration(len(s.CPU))
	outer0 := time.Now()
	m0, err := readMachineTimes(proc)
	if err != nil {
		t.Fatal(err)
	}
	inner0 := time.Now()
	spin(t, 200*time.Millisecond)
	inner1 := time.Now()
	m1, err := readMachineTimes(proc)
	if err != nil {
		t.Fatal(err)
	}
	outer1 := time.Now()

	if m0.busy <= 0 || m0.busy > m0.all || m1.busy > m1.all {
		t.Errorf("busy > all, or none: %+v, %+v", m0, m1)
	}
	busy, all := m1.busy-m0.busy, m1.all-m0.all
	if busy < 100*time.Millisecond || busy > all {
		t.Errorf("busy time grew by %v over a spin of 200ms, all by %v", busy, all)
	}
	// Every core's time grows with the clock, less what the ticks have not counted yet.
	if lo, hi := inner1.Sub(inner0)*cores/2, outer1.Sub(outer0)*cores+2*tick*cores; all < lo || all > hi {
		t.Errorf("all cores' time grew by %v, want %v to %v over %v on %d cores", all, lo, hi, inner1.Sub(inner0), cores)
	}
}

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

func TestProcErrorNoProcess(t *testing.T) {
	t.Parallel()
	proc := testProcFS(t)
	const pid = 1 << 30 // above the most pids Linux allows
	_, err := readProcTimes(proc, pid)
	if !errors.Is(err, fs.ErrNotExist) { // the meter skips a backend that exited by this
		t.Fatalf("reading pid %d: %v, want fs.ErrNotExist", pid, err)
	}
	if msg := procError("PostgreSQL's backend pid 1073741824", err).Error(); !strings.Contains(msg, "reads CPU times from Linux's /proc") {
		t.Errorf("procError: %s", msg)
	}
	// procfs returns os.Open's error as it is.
	denied := procError("PostgreSQL's backend pid 7", &fs.PathError{Op: "open", Path: "/proc/7/stat", Err: syscall.EACCES})
	if !errors.Is(denied, fs.ErrPermission) || !strings.Contains(denied.Error(), "run the bench as root") {
		t.Errorf("procError: %v", denied)
	}
}
