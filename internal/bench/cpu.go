package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"time"

	"github.com/prometheus/procfs"
)

// The rate scenario measures what a job costs in CPU time, read from Linux's /proc with procfs: this
// process and PostgreSQL's backends (/proc/<pid>/stat) and the whole machine (/proc/stat). The kernel
// counts all three in clock ticks, which procfs turns into seconds at Linux's USER_HZ, so a figure is
// good to a tick per process: the scenario's windows are minutes long.

// procTimes is what /proc/<pid>/stat says of a process.
type procTimes struct {
	cpu  time.Duration   // utime + stime: every thread's, living or exited
	stat procfs.ProcStat // the rest; Comm is the executable's name, not the title a process sets
}

// readProcTimes reads a process's /proc/<pid>/stat; pid 0 is this process, read as /proc/self,
// which names it in the pid namespace of /proc whatever its own is.
func readProcTimes(proc procfs.FS, pid int) (procTimes, error) {
	var p procfs.Proc
	var err error
	if pid == 0 {
		p, err = proc.Self()
	} else {
		p, err = proc.Proc(pid)
	}
	if err != nil {
		return procTimes{}, err
	}
	s, err := p.Stat()
	if err != nil {
		return procTimes{}, err
	}
	return procTimes{cpu: seconds(s.CPUTime()), stat: s}, nil
}

// started returns when the process started. It reads /proc/stat again for the machine's boot time,
// which the process's start counts from, so the meter asks it only once.
func (t procTimes) started() (time.Time, error) {
	s, err := t.stat.StartTime()
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, 0).Add(seconds(s)), nil
}

// machineTimes is the machine's CPU time from /proc/stat's "cpu" line, summed over its cores: busy
// is user, nice, system, irq, softirq and steal (guest time is inside user), all is busy plus idle
// and iowait.
type machineTimes struct {
	busy, all time.Duration
}

// readMachineTimes reads /proc/stat.
func readMachineTimes(proc procfs.FS) (machineTimes, error) {
	s, err := proc.Stat()
	if err != nil {
		return machineTimes{}, err
	}
	c := s.CPUTotal
	busy := c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
	m := machineTimes{busy: seconds(busy), all: seconds(busy + c.Idle + c.Iowait)}
	if m.all <= 0 { // procfs reads a /proc/stat without a cpu line as all zeros
		return m, errors.New("/proc/stat: no cpu line")
	}
	return m, nil
}

// seconds converts procfs's seconds to a duration, rounded to the nanosecond since procfs divides
// the kernel's ticks in floating point.
func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}

// procError says why a process's /proc entry could not be read, and what to do about it.
func procError(what string, err error) error {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("reading the CPU time of %s: %w: run the bench as root or as the database server's user "+
			"(and /proc without hidepid), since it reads the server's processes in /proc", what, err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("reading the CPU time of %s: %w: the rate scenario reads CPU times from Linux's /proc", what, err)
	}
	return fmt.Errorf("reading the CPU time of %s: %w", what, err)
}
