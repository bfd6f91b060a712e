// Package pgproc starts throw-away PostgreSQL clusters on this machine, for the tests that stop,
// restart or kill a whole server (the fault suite), which must never touch the machine's shared one.
//
// A cluster is initdb'd into a temporary directory (the data directory, the Unix socket and the
// server's log live there), listens on 127.0.0.1 on a free port, and trusts every local connection.
// Its postmaster is this process's own child, not daemonized by pg_ctl, in a process group of its
// own: it and its backends (its children, each of which PostgreSQL makes a session leader) are ours
// to stop and kill, and the kernel kills it should its parent die. Stop and Restart go through
// pg_ctl, as an operator's restart would.
//
// initdb and postgres refuse to run as root: when this process is root, they (and pg_ctl) run as
// the postgres user, which owns the directory.
//
// fsync is off, for speed: a commit is still written to the kernel before it is acknowledged
// (synchronous_commit stays on), so a stop in any mode, even SIGKILL of every process, loses
// nothing acknowledged; only a crash of the machine itself could, which a throw-away cluster does
// not outlive anyway.
package pgproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// Mode is how Stop and Restart shut the server down (pg_ctl stop -m).
type Mode string

const (
	// Smart waits for every client to disconnect.
	Smart Mode = "smart"
	// Fast ends every session (clients see "terminating connection due to administrator command"),
	// then checkpoints and exits.
	Fast Mode = "fast"
	// Immediate ends every process at once, without a checkpoint, like a crash of the server (not
	// of the machine): the next start replays the WAL.
	Immediate Mode = "immediate"
)

// Timeouts: a start includes crash recovery after an immediate stop; a stop waits for sessions to end.
const (
	readyTimeout = 60 * time.Second
	stopTimeout  = 60 * time.Second
)

// Options configure Start.
type Options struct {
	// BinDir holds initdb, postgres and pg_ctl; empty: see BinDir.
	BinDir string
	// Port to listen on; 0: a free port (another process may take it between the check and the
	// bind, so a few are tried).
	Port int
	// Settings are more server settings (postgres -c name=value), e.g. autovacuum or
	// max_connections; they override the defaults (listen_addresses, the socket directory, fsync).
	Settings map[string]string
}

// Cluster is one throw-away PostgreSQL cluster. Its methods are safe for concurrent use.
type Cluster struct {
	// Dir holds the data directory (data/), the Unix socket and the server's log (server.log). It
	// is removed by Close.
	Dir string
	// Port is the TCP port on 127.0.0.1, the same across restarts.
	Port int
	// URL connects to the database "postgres" as the superuser "postgres" over TCP.
	URL string

	bin  string
	cred *syscall.Credential // nil: run the server's programs as this process's user
	args []string            // postgres's arguments but the port

	mu   sync.Mutex
	proc *postmaster // the running postmaster; nil once stopped or killed
}

// postmaster is one run of the server's main process.
type postmaster struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited and been reaped
}

// Start creates a cluster and starts its server, and returns once it accepts connections. On
// failure nothing is left behind; the error includes the server's log when the server failed.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin := opts.BinDir
	if bin == "" {
		var err error
		if bin, err = BinDir(); err != nil {
			return nil, err
		}
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "jobpipe-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgproc: %w", err)
	}
	c := &Cluster{Dir: dir, bin: bin, cred: cred}
	if err := c.init(ctx, opts.Settings); err != nil {
		_ = c.Close()
		return nil, err
	}
	if err := c.startFirst(ctx, opts.Port); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// init creates the data directory with initdb and fixes the server's arguments.
func (c *Cluster) init(ctx context.Context, extra map[string]string) error {
	if c.cred != nil {
		if err := os.Chown(c.Dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("pgproc: giving %s to the server's user: %w", c.Dir, err)
		}
	}
	if out, err := c.run(ctx, "initdb", "-D", c.dataDir(), "--auth=trust", "--username=postgres",
		"--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"); err != nil {
		return fmt.Errorf("pgproc: initdb: %w\n%s", err, out)
	}
	settings := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"unix_socket_directories": c.Dir,
		"fsync":                   "off", // see the package documentation
	}
	for k, v := range extra {
		settings[k] = v
	}
	names := make([]string, 0, len(settings))
	for k := range settings {
		names = append(names, k)
	}
	sort.Strings(names)
	c.args = []string{"-D", c.dataDir()}
	for _, k := range names {
		c.args = append(c.args, "-c", k+"="+settings[k])
	}
	return nil
}

// startFirst starts the server on port, or on a free one.
func (c *Cluster) startFirst(ctx context.Context, port int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if port != 0 {
		return c.startLocked(ctx, port)
	}
	var errs []error
	for range 5 {
		free, err := freePort()
		if err != nil {
			return err
		}
		if err = c.startLocked(ctx, free); err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// startLocked starts the postmaster on port and waits until it accepts connections.
func (c *Cluster) startLocked(ctx context.Context, port int) error {
	logFile, err := os.OpenFile(c.logPath(), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("pgproc: server log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	before, _ := logFile.Seek(0, 2)
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), append([]string{"-p", strconv.Itoa(port)}, c.args...)...)
	cmd.Dir = c.Dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = c.procAttr(true)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgproc: starting postgres: %w", err)
	}
	p := &postmaster{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // reaps it; how it ended shows in its log
		close(p.exited)
	}()
	c.proc = p
	if err := c.waitReady(ctx, p); err != nil {
		c.killLocked()
		return fmt.Errorf("pgproc: postgres on port %d: %w; its log:\n%s", port, err, c.logSince(before))
	}
	c.Port = port
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return nil
}

// waitReady polls the data directory's postmaster.pid until it names p as ready to accept
// connections (the state pg_ctl itself waits for), p exits, or time runs out.
func (c *Cluster) waitReady(ctx context.Context, p *postmaster) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		lines := c.pidFile()
		if len(lines) >= 8 && strings.TrimSpace(lines[0]) == strconv.Itoa(p.cmd.Process.Pid) &&
			strings.TrimSpace(lines[7]) == "ready" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v", readyTimeout)
		}
		select {
		case <-p.exited:
			return errors.New("exited before accepting connections")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Pid returns the postmaster's process id, or 0 when the server is not running.
func (c *Cluster) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return 0
	}
	return c.proc.cmd.Process.Pid
}

// Stop shuts the server down in mode through pg_ctl and waits until the postmaster has exited.
// Stopping a server that is not running does nothing.
func (c *Cluster) Stop(ctx context.Context, mode Mode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopLocked(ctx, mode)
}

func (c *Cluster) stopLocked(ctx context.Context, mode Mode) error {
	if c.proc == nil {
		return nil
	}
	select {
	case <-c.proc.exited: // it died on its own: nothing to stop
		c.proc = nil
		return nil
	default:
	}
	backends := children(c.proc.cmd.Process.Pid)
	out, err := c.run(ctx, "pg_ctl", "stop", "-D", c.dataDir(), "-m", string(mode), "-w", "-t", strconv.Itoa(int(stopTimeout.Seconds())))
	if err != nil {
		return fmt.Errorf("pgproc: pg_ctl stop -m %s: %w\n%s", mode, err, out)
	}
	select {
	case <-c.proc.exited:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("pgproc: pg_ctl stop -m %s returned, but the postmaster (pid %d) has not exited", mode, c.proc.cmd.Process.Pid)
	}
	// A backend still attached to the server's shared memory makes the next start refuse to run.
	waitGone(backends, 5*time.Second)
	c.proc = nil
	return nil
}

// Restart stops the server in mode through pg_ctl (what `pg_ctl restart -m mode` does first) and
// starts it again on the same port and directory, returning once it accepts connections: after an
// immediate stop, once it has replayed the WAL. It also starts a server that was stopped or killed.
func (c *Cluster) Restart(ctx context.Context, mode Mode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.stopLocked(ctx, mode); err != nil {
		return err
	}
	return c.startLocked(ctx, c.Port)
}

// Kill sends SIGKILL to the postmaster and every backend and waits for them to exit: a crash in
// which nothing runs on the way out. Killing a server that is not running does nothing.
func (c *Cluster) Kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.killLocked()
}

func (c *Cluster) killLocked() {
	if c.proc == nil {
		return
	}
	shm := c.pidFile()
	select {
	case <-c.proc.exited:
		// Reaped already: its pid, and so its group's id, may belong to someone else by now.
	default:
		pid := c.proc.cmd.Process.Pid
		// Stopped, the postmaster starts no backend while they are listed. Each leads a process group
		// of its own, so they are killed one by one: left alive, a busy one would run on, attached
		// to the shared memory, until it next waited and saw the postmaster gone.
		_ = syscall.Kill(pid, syscall.SIGSTOP)
		backends := children(pid)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		for _, b := range backends {
			_ = syscall.Kill(b, syscall.SIGKILL)
		}
		<-c.proc.exited
		waitGone(backends, 5*time.Second)
	}
	c.proc = nil
	// Nothing ran on the way out, so the server's small System V segment is left; a later start
	// would remove it, but a killed cluster may never start again.
	if len(shm) >= 7 {
		if f := strings.Fields(shm[6]); len(f) == 2 {
			if id, err := strconv.Atoi(f[1]); err == nil {
				// ipcrm rather than shmctl: syscall has no SYS_SHMCTL on every architecture.
				_ = exec.Command("ipcrm", "-m", strconv.Itoa(id)).Run()
			}
		}
	}
}

// children returns the processes whose parent is pid (none where /proc cannot be read).
func children(pid int) []int {
	procs, _ := procfs.AllProcs()
	var out []int
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && st.PPID == pid {
			out = append(out, p.PID)
		}
	}
	return out
}

// procState returns a process's state letter from /proc and whether it is alive: not gone, and no
// zombie, which waits to be reaped by its new parent and holds no memory.
func procState(pid int) (state string, alive bool) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return "", false
	}
	st, err := p.Stat()
	if err != nil {
		return "", false
	}
	return st.State, st.State != "Z"
}

// waitGone waits, up to limit, until no process of pids is alive (see procState).
func waitGone(pids []int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for _, pid := range pids {
		for time.Now().Before(deadline) {
			if _, alive := procState(pid); !alive {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// Close stops the server at once (immediate), kills whatever is left of it, and removes Dir.
func (c *Cluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stopErr := c.stopLocked(ctx, Immediate)
	c.killLocked()
	if err := os.RemoveAll(c.Dir); err != nil {
		return errors.Join(stopErr, fmt.Errorf("pgproc: %w", err))
	}
	return stopErr
}

// Log returns the server's log so far.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(c.logPath())
	return string(b)
}

// run runs one of the server's programs as the server's user and returns its output.
func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir
	cmd.SysProcAttr = c.procAttr(false)
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// procAttr runs a child as the server's user, dies with this process, and, for the postmaster
// (group), leads a process group of its own that its backends join.
func (c *Cluster) procAttr(group bool) *syscall.SysProcAttr {
	a := childProcAttr()
	a.Credential = c.cred
	a.Setpgid = group
	return a
}

func (c *Cluster) dataDir() string { return filepath.Join(c.Dir, "data") }
func (c *Cluster) logPath() string { return filepath.Join(c.Dir, "server.log") }

// pidFile returns the lines of postmaster.pid: pid, data directory, start time, port, socket
// directory, listen address, shared memory key and id, status.
func (c *Cluster) pidFile() []string {
	b, err := os.ReadFile(filepath.Join(c.dataDir(), "postmaster.pid"))
	if err != nil {
		return nil
	}
	return strings.Split(string(b), "\n")
}

// logSince returns the log written after offset.
func (c *Cluster) logSince(offset int64) string {
	b, _ := os.ReadFile(c.logPath())
	if offset > int64(len(b)) {
		offset = 0
	}
	return strings.TrimSpace(string(b[offset:]))
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgproc: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
