package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"
)

// The rate scenario measures what a job costs in CPU time, read from Linux's /proc: this process
// (/proc/self/stat), PostgreSQL's backends (/proc/<pid>/stat) and the whole machine (/proc/stat).
// The kernel counts all three in clock ticks (USER_HZ, 1/100 s on Linux), so a figure is good to a
// tick per process: the scenario's windows are minutes long.

// procTimes is what /proc/<pid>/stat says of a process.
type procTimes struct {
	comm  string // the executable's name, as the kernel keeps it (not the title a process sets)
	cpu   int64  // utime + stime in ticks: every thread's, living or exited
	start int64  // starttime: when the process started, in ticks after the machine's boot
}

// parseProcStat parses /proc/<pid>/stat. The name (field 2) is in parentheses and may itself hold
// spaces and parentheses, so the fields are counted from its last ')'.
func parseProcStat(data []byte) (procTimes, error) {
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return procTimes{}, fmt.Errorf("no (name) in %q", data)
	}
	// After the name: state (field 3) is f[0], utime (14) f[11], stime (15) f[12], starttime (22) f[19].
	f := bytes.Fields(data[end+1:])
	if len(f) < 20 {
		return procTimes{}, fmt.Errorf("%d fields after the name, want at least 20", len(f))
	}
	var n [3]int64
	for i, field := range [3]int{11, 12, 19} {
		v, err := strconv.ParseInt(string(f[field]), 10, 64)
		if err != nil {
			return procTimes{}, fmt.Errorf("field %d: %w", field+3, err)
		}
		n[i] = v
	}
	return procTimes{comm: string(data[open+1 : end]), cpu: n[0] + n[1], start: n[2]}, nil
}

// readProcTimes reads /proc/<pid>/stat; pid is a number or "self".
func readProcTimes(pid string) (procTimes, error) {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return procTimes{}, err
	}
	t, err := parseProcStat(data)
	if err != nil {
		return procTimes{}, fmt.Errorf("/proc/%s/stat: %w", pid, err)
	}
	return t, nil
}

// machineTimes is the machine's CPU time from /proc/stat's "cpu" line, in ticks, summed over its
// cores: busy is user, nice, system, irq, softirq and steal (guest time is inside user), all is busy
// plus idle and iowait.
type machineTimes struct {
	busy, all int64
	boot      int64 // btime: the machine's boot, in Unix seconds
}

// parseMachineStat parses /proc/stat's "cpu" and "btime" lines.
func parseMachineStat(data []byte) (machineTimes, error) {
	var m machineTimes
	var cpu, btime bool
	for line := range bytes.Lines(data) {
		f := bytes.Fields(line)
		switch {
		case len(f) >= 9 && string(f[0]) == "cpu":
			var v [8]int64 // user nice system idle iowait irq softirq steal
			for i := range v {
				n, err := strconv.ParseInt(string(f[i+1]), 10, 64)
				if err != nil {
					return m, fmt.Errorf("/proc/stat: cpu line: %w", err)
				}
				v[i] = n
			}
			m.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
			m.all = m.busy + v[3] + v[4]
			cpu = true
		case len(f) == 2 && string(f[0]) == "btime":
			n, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				return m, fmt.Errorf("/proc/stat: btime line: %w", err)
			}
			m.boot, btime = n, true
		}
	}
	if !cpu || !btime {
		return m, errors.New("/proc/stat: no cpu or btime line")
	}
	return m, nil
}

func readMachineTimes() (machineTimes, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTimes{}, err
	}
	return parseMachineStat(data)
}

// atClkTck is the auxiliary vector's entry for the clock ticks per second.
const atClkTck = 17

// clockTicks is the kernel's clock ticks per second (USER_HZ), as sysconf(_SC_CLK_TCK) reads it
// from the auxiliary vector; 100, Linux's value everywhere Go runs, when /proc/self/auxv says nothing.
func clockTicks() int64 {
	if data, err := os.ReadFile("/proc/self/auxv"); err == nil {
		if hz := auxvValue(data, atClkTck); hz > 0 {
			return hz
		}
	}
	return 100
}

// auxvValue returns the value of key in an auxiliary vector of native words, 0 when it is absent.
func auxvValue(data []byte, key uint64) int64 {
	word := strconv.IntSize / 8
	get := func(b []byte) uint64 {
		if word == 4 {
			return uint64(binary.NativeEndian.Uint32(b))
		}
		return binary.NativeEndian.Uint64(b)
	}
	for i := 0; i+2*word <= len(data); i += 2 * word {
		if k := get(data[i:]); k == key {
			return int64(get(data[i+word:]))
		} else if k == 0 { // AT_NULL ends the vector
			break
		}
	}
	return 0
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

// ticksToDuration converts clock ticks to a duration.
func ticksToDuration(ticks, hz int64) time.Duration {
	return time.Duration(ticks) * time.Second / time.Duration(hz)
}
