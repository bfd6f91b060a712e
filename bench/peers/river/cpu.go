package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/procfs"
)

// rate measures what a job costs in CPU time, read from Linux's /proc with procfs, as jobpipe's rate
// scenario does (internal/bench/cpu.go and cpumeter.go, the same method, so that the figures
// compare): this process and PostgreSQL's backends (/proc/<pid>/stat) and the whole machine
// (/proc/stat). The kernel counts all three in clock ticks, which procfs turns into seconds at
// Linux's USER_HZ, so a figure is good to a tick per process: the scenario's windows are minutes long.

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

// meterPollEvery is how often the meter samples the run's backends during its window, so that a
// backend that disconnects mid-window loses at most this much of its CPU time.
const meterPollEvery = time.Second

// exitWait bounds how long the meter waits for the run's backends to exit once its pools closed.
const exitWait = 10 * time.Second

// statsFlushWait is how long the meter waits after the run's backends left pg_stat_activity before
// it reads the database's transactions: a backend publishes its counts as it exits, after it leaves
// pg_stat_activity.
const statsFlushWait = 250 * time.Millisecond

// startTolerance is how far a backend's start in /proc may be from PostgreSQL's backend_start: the
// kernel counts it from the machine's boot time, which /proc/stat gives in whole seconds.
const startTolerance = 3 * time.Second

// backendID names a backend: a pid may be reused by a later backend, a pid and its start may not.
type backendID struct {
	pid   int32
	start time.Time
}

// backendCPU is one backend's CPU time: at the window's start (0 for a backend that connected
// during it) and at its last sample; gone once it has disconnected.
type backendCPU struct {
	base, last time.Duration
	gone       bool
}

// cpuMeter measures a run's window: the CPU time of this process, of the PostgreSQL backends that
// serve the run and of the whole machine, and the database's transactions.
//
// The run's backends are the client backends whose application_name is the run's own (app): every
// pool of the run connects with it, while the meter's connection and other connections
// add a suffix to it. They are listed from pg_stat_activity and their utime+stime read from
// /proc/<pid>/stat at the window's start, every meterPollEvery during it, and at its end. A backend
// present at the start counts from its time then; one that connects during the window counts from
// zero (its whole life is the window's); one that disconnects counts up to its last sample. The run's
// pools keep their connections for the whole window, so backends that come or go are reported, not
// expected.
type cpuMeter struct {
	conn *pgx.Conn // the meter's own connection, under the name app + " (cpu meter)"
	app  string
	proc procfs.FS // Linux's /proc

	mu                 sync.Mutex // conn and the counts below: the poller uses them too
	backends           map[backendID]*backendCPU
	came, went, others int
	statements         int64 // statements conn ran from the window's first read of the transactions
	pollErr            error

	startedAt       time.Time
	self0           time.Duration
	machine0        machineTimes
	xacts0          int64
	stopPoll        chan struct{}
	polled          chan struct{}
	polling, closed bool
}

// cpuWindow is what the meter measured over a window.
type cpuWindow struct {
	Elapsed time.Duration `json:"-"`
	// Self is this process's CPU time: the client, the insert callers, the bench's bookkeeping.
	Self time.Duration `json:"-"`
	// PG is the run's backends' CPU time; Machine every core's busy time, MachineAll every core's time.
	PG, Machine, MachineAll time.Duration `json:"-"`
	// Backends were measured; Came connected and Went disconnected during the window.
	Backends, Came, Went int
	// Others is the most clients of the database outside the run seen at once: their transactions,
	// if they ran any, are in Xacts.
	Others int
	// Xacts is the database's transactions (committed and rolled back) during the window, less the
	// meter's own.
	Xacts int64
}

// newCPUMeter connects the meter and checks that it can read the server's backends in /proc: the
// server must run on this machine, in its pid namespace, and its processes be readable.
func newCPUMeter(ctx context.Context, cc *pgx.ConnConfig, app string) (*cpuMeter, error) {
	proc, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, procError("this process", err)
	}
	if _, err := readProcTimes(proc, 0); err != nil {
		return nil, procError("this process", err)
	}
	if _, err := readMachineTimes(proc); err != nil {
		return nil, procError("the machine", err)
	}
	cc = cc.Copy()
	cc.RuntimeParams["application_name"] = app + " (cpu meter)"
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, err
	}
	m := &cpuMeter{conn: conn, app: app, proc: proc, backends: map[backendID]*backendCPU{}}
	if err := m.checkLocal(ctx); err != nil {
		m.close(ctx)
		return nil, err
	}
	return m, nil
}

// checkLocal reads the meter's own backend in /proc: its pid must be a process that started when
// PostgreSQL says the backend did. A server in a container or on another host has pids of its own,
// which name another process here or none.
func (m *cpuMeter) checkLocal(ctx context.Context) error {
	var pid int32
	var started time.Time
	if err := m.conn.QueryRow(ctx, "SELECT pg_backend_pid(), backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()").
		Scan(&pid, &started); err != nil {
		return fmt.Errorf("reading the meter's own backend in pg_stat_activity: %w", err)
	}
	pt, err := readProcTimes(m.proc, int(pid))
	var at time.Time
	if err == nil {
		if at, err = pt.started(); err != nil {
			return procError("the machine", err)
		}
	}
	if errors.Is(err, fs.ErrNotExist) || (err == nil && absDuration(at.Sub(started)) > startTolerance) {
		what := "no process here"
		if err == nil {
			what = fmt.Sprintf("process %q here, started %s", pt.stat.Comm, at.Format(time.RFC3339))
		}
		return fmt.Errorf("PostgreSQL's backend pid %d (started %s) is %s: the server is not a process of this machine "+
			"(a container or another host), and rate reads its backends' CPU time in /proc: run it on the "+
			"database's host", pid, started.Format(time.RFC3339), what)
	}
	if err != nil {
		return procError(fmt.Sprintf("PostgreSQL's backend pid %d", pid), err)
	}
	return nil
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// begin starts the window: the transactions, this process, the machine and the run's backends, then
// the poller. The run's pools must be open by now.
func (m *cpuMeter) begin(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	xacts, err := m.readXacts(ctx)
	if err != nil {
		return err
	}
	m.xacts0, m.statements = xacts, 1 // the read's own transaction is published after it
	if err := m.sample(ctx, true); err != nil {
		return err
	}
	if len(m.backends) == 0 {
		return fmt.Errorf("no backend of the run (application_name %q) is connected to the database", m.app)
	}
	self, err := readProcTimes(m.proc, 0)
	if err != nil {
		return procError("this process", err)
	}
	mt, err := readMachineTimes(m.proc)
	if err != nil {
		return procError("the machine", err)
	}
	m.startedAt, m.self0, m.machine0 = time.Now(), self.cpu, mt
	m.stopPoll, m.polled, m.polling = make(chan struct{}), make(chan struct{}), true
	go m.poll(ctx)
	return nil
}

// poll samples the backends every meterPollEvery until end stops it; the first error is kept.
func (m *cpuMeter) poll(ctx context.Context) {
	defer close(m.polled)
	t := time.NewTicker(meterPollEvery)
	defer t.Stop()
	for {
		select {
		case <-m.stopPoll:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.mu.Lock()
		if m.pollErr == nil {
			m.pollErr = m.sample(ctx, false)
		}
		m.mu.Unlock()
	}
}

// end ends the window: a last sample of the backends, this process and the machine. The
// transactions come later, from transactions, once the run's backends have exited.
func (m *cpuMeter) end(ctx context.Context) (cpuWindow, error) {
	m.stopPolling()
	m.mu.Lock()
	defer m.mu.Unlock()
	var w cpuWindow
	if m.pollErr != nil {
		return w, m.pollErr
	}
	if err := m.sample(ctx, false); err != nil {
		return w, err
	}
	self, err := readProcTimes(m.proc, 0)
	if err != nil {
		return w, procError("this process", err)
	}
	mt, err := readMachineTimes(m.proc)
	if err != nil {
		return w, procError("the machine", err)
	}
	w.Elapsed = time.Since(m.startedAt)
	for _, b := range m.backends {
		w.PG += b.last - b.base
	}
	w.Self = self.cpu - m.self0
	w.Machine = mt.busy - m.machine0.busy
	w.MachineAll = mt.all - m.machine0.all
	w.Backends, w.Came, w.Went, w.Others = len(m.backends), m.came, m.went, m.others
	return w, nil
}

// transactions returns the database's transactions since begin, less the meter's own. Call it once
// the run's pools are closed: it waits for their backends to exit, since a backend publishes its
// counts as it exits (and otherwise only about once a second while idle), then reads. Anything
// else the database ran meanwhile counts too: cpuWindow.Others says whether anything else was
// connected to it.
func (m *cpuMeter) transactions(ctx context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for deadline := time.Now().Add(exitWait); ; {
		var n int
		err := m.conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", m.app).Scan(&n)
		m.statements++
		if err != nil {
			return 0, fmt.Errorf("waiting for the run's backends to exit: %w", err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("gave up after %v waiting for the run's %d backends to exit", exitWait, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(statsFlushWait)
	xacts, err := m.readXacts(ctx)
	if err != nil {
		return 0, err
	}
	return xacts - m.xacts0 - m.statements, nil
}

func (m *cpuMeter) readXacts(ctx context.Context) (int64, error) {
	var n int64
	err := m.conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("reading the database's transactions in pg_stat_database: %w", err)
	}
	return n, nil
}

// sample lists the database's client backends and reads the run's in /proc; first sets their base.
// The caller holds mu.
func (m *cpuMeter) sample(ctx context.Context, first bool) error {
	rows, err := m.conn.Query(ctx, `SELECT pid, backend_start, coalesce(application_name, '') FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`)
	m.statements++
	if err != nil {
		return fmt.Errorf("listing the run's backends in pg_stat_activity: %w", err)
	}
	type listed struct {
		id  backendID
		app string
	}
	var all []listed
	var l listed
	if _, err := pgx.ForEachRow(rows, []any{&l.id.pid, &l.id.start, &l.app}, func() error {
		all = append(all, l)
		return nil
	}); err != nil {
		return fmt.Errorf("listing the run's backends in pg_stat_activity: %w", err)
	}
	live, others := map[backendID]bool{}, 0
	for _, b := range all {
		switch {
		case b.app == m.app:
		case strings.HasPrefix(b.app, m.app+" "): // the meter's and the bookkeeping pool's
			continue
		default:
			others++
			continue
		}
		t, err := readProcTimes(m.proc, int(b.id.pid))
		if errors.Is(err, fs.ErrNotExist) {
			continue // it exited since the list was read
		}
		if err != nil {
			return procError(fmt.Sprintf("PostgreSQL's backend pid %d", b.id.pid), err)
		}
		live[b.id] = true
		c, ok := m.backends[b.id]
		if !ok {
			c = &backendCPU{}
			if first {
				c.base = t.cpu
			} else {
				m.came++
			}
			m.backends[b.id] = c
		}
		c.last = t.cpu
	}
	for id, c := range m.backends {
		if !live[id] && !c.gone {
			m.went++
			c.gone = true // it keeps its last sample's time
		}
	}
	m.others = max(m.others, others)
	return nil
}

// stopPolling stops the poller, if it runs, and waits for it.
func (m *cpuMeter) stopPolling() {
	if m.polling {
		m.polling = false
		close(m.stopPoll)
		<-m.polled
	}
}

// close stops the poller and closes the meter's connection; safe to call twice.
func (m *cpuMeter) close(ctx context.Context) {
	m.stopPolling()
	if m.closed {
		return
	}
	m.closed = true
	m.conn.Close(context.WithoutCancel(ctx))
}
