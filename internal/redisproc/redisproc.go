// Package redisproc starts throw-away redis-server processes on this machine: no persistence, bound
// to 127.0.0.1, not daemonized (so the pid is ours to signal and kill), and killed by the kernel if
// their parent dies. The test harness uses them as Redlock nodes to kill, pause and restart; the
// benchmark command spawns them with --spawn-redis.
package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// readyTimeout is how long a started redis-server gets to answer PING.
const readyTimeout = 10 * time.Second

// Binary finds redis-server, or says how to install it.
func Binary() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redisproc: redis-server is not installed (%v): install it (apt-get install redis-server)", err)
	}
	return bin, nil
}

// Server is one running redis-server process.
type Server struct {
	// Addr is 127.0.0.1:Port.
	Addr string
	// Port is the port it listens on.
	Port int

	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts bin on port (0: a free port; another process may take it between the check and the
// bind, so a few are tried), with its working directory and log in dir, and waits until it answers
// PING. A failed start's error includes the server's log.
func Start(ctx context.Context, bin, dir string, port int) (*Server, error) {
	if port != 0 {
		return start(ctx, bin, dir, port)
	}
	var errs []error
	for range 5 {
		free, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := start(ctx, bin, dir, free)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func start(ctx context.Context, bin, dir string, port int) (*Server, error) {
	logPath := filepath.Join(dir, fmt.Sprintf("redis-%d.log", port))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("redisproc: log file: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", dir)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redisproc: starting redis-server: %w", err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // reaps the process; its exit status matters to no one
		close(s.exited)
	}()
	if err := s.waitReady(ctx); err != nil {
		s.Kill()
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("redisproc: redis-server on port %d: %w; its log:\n%s", port, err, strings.TrimSpace(string(log)))
	}
	return s, nil
}

// Pid returns the process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Signal sends sig to the process (SIGSTOP and SIGCONT pause and resume it).
func (s *Server) Signal(sig os.Signal) error { return s.cmd.Process.Signal(sig) }

// Kill sends SIGKILL, which also ends a stopped process, and waits for it to exit: like a crash,
// nothing is flushed. Killing a server that has exited does nothing.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// waitReady polls until the server answering on Addr is this process (another one may hold the
// port, and answer, while this one fails to bind it), it exits, or time runs out.
func (s *Server) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		pid, err := serverPid(s.Addr)
		if err == nil && pid == s.Pid() {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("the port is served by another process (pid %d)", pid)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING after %v: %w", readyTimeout, err)
		}
		select {
		case <-s.exited:
			return errors.New("exited before answering")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ping speaks just enough RESP to check a server without creating a client.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// serverPid asks the server on addr for its process id (INFO server), without creating a client.
func serverPid(addr string) (int, error) {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := conn.Write([]byte("INFO server\r\n")); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, err
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redisproc: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
