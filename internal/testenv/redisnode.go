package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisNodeReadyTimeout is how long a started redis-server gets to answer PING.
const redisNodeReadyTimeout = 10 * time.Second

// RedisNode is a redis-server process that belongs to one test: no persistence, bound to
// 127.0.0.1 on a free port, not daemonized (so its pid is ours to signal). It is killed when the
// test ends, whatever the outcome.
type RedisNode struct {
	// Addr is the node's 127.0.0.1:port; it stays the same across Restart.
	Addr string

	t    testing.TB
	bin  string
	port int
	dir  string

	mu      sync.Mutex
	cmd     *exec.Cmd     // the running process, nil after Kill
	exited  chan struct{} // closed when cmd has exited and been waited for
	starts  int           // numbers the log files
	clients []*redis.Client
}

// StartRedisNodes starts n independent redis-server processes (n >= 1) for t and waits until each
// answers PING. They are killed when t ends. It fails t, asking for the package, when the
// redis-server binary is not installed: Redlock tests need real nodes.
func StartRedisNodes(t testing.TB, n int) []*RedisNode {
	t.Helper()
	if n < 1 {
		t.Fatalf("testenv: StartRedisNodes(%d): want at least one node", n)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("testenv: redis-server is not installed (%v): install it (apt-get install redis-server) to run the tests that start their own Redis nodes", err)
	}
	nodes := make([]*RedisNode, 0, n)
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.stop()
		}
	})
	for range n {
		nd := &RedisNode{t: t, bin: bin, dir: t.TempDir()}
		if err := nd.startOnFreePort(); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, nd)
	}
	return nodes
}

// Pid returns the process id of the running redis-server, or 0 after Kill.
func (n *RedisNode) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Kill sends SIGKILL and waits for the process to exit: like a crash, nothing is flushed.
// Killing a node that is not running does nothing.
func (n *RedisNode) Kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.killLocked()
}

// Restart kills the node if it runs and starts it again, empty, on the same port: like a restart
// without persistence. It fails t when the node does not come back.
func (n *RedisNode) Restart(t testing.TB) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.killLocked()
	if err := n.startLocked(n.port); err != nil {
		t.Fatal(err)
	}
}

// Pause stops the process with SIGSTOP: it keeps its connections but answers nothing, like a
// stalled server. A paused node is still killed at the end of the test.
func (n *RedisNode) Pause() { n.signal(syscall.SIGSTOP) }

// Resume continues a paused process with SIGCONT.
func (n *RedisNode) Resume() { n.signal(syscall.SIGCONT) }

// Client returns a new client for the node, with the same short timeouts as NewRedis's
// clients. It is closed when the test ends.
func (n *RedisNode) Client() *redis.Client {
	opts, err := redisOptions(n.Addr)
	if err != nil {
		n.t.Fatal(err) // cannot happen: Addr is always 127.0.0.1:port
	}
	c := redis.NewClient(opts)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.clients = append(n.clients, c)
	return c
}

// signal sends sig to the running process; an error fails the test without stopping it.
func (n *RedisNode) signal(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		n.t.Errorf("testenv: redis node %s: %v: not running", n.Addr, sig)
		return
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		n.t.Errorf("testenv: redis node %s: %v: %v", n.Addr, sig, err)
	}
}

// stop closes the node's clients and kills the process: the test's cleanup.
func (n *RedisNode) stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.clients {
		_ = c.Close()
	}
	n.clients = nil
	n.killLocked()
}

func (n *RedisNode) killLocked() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Kill() // SIGKILL, which also ends a stopped process
	<-n.exited
	n.cmd = nil
}

// startOnFreePort starts the node on a port the kernel says is free. Another process may take
// the port between the check and redis-server's bind, so a few ports are tried.
func (n *RedisNode) startOnFreePort() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return err
		}
		err = n.startLocked(port)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// startLocked starts redis-server on port and waits until it answers PING.
func (n *RedisNode) startLocked(port int) error {
	n.starts++
	logPath := filepath.Join(n.dir, fmt.Sprintf("redis-%d.log", n.starts))
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("testenv: redis node log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor

	cmd := exec.Command(n.bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", n.dir)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testenv: start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // reaps the process; its exit status matters to no one
		close(exited)
	}()
	n.cmd, n.exited, n.port = cmd, exited, port
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if n.Addr != addr { // only on the first start: tests may read Addr during a Restart
		n.Addr = addr
	}

	if err := waitForPong(addr, exited); err != nil {
		n.killLocked()
		log, _ := os.ReadFile(logPath)
		return fmt.Errorf("testenv: redis-server on port %d: %w; its log:\n%s", port, err, strings.TrimSpace(string(log)))
	}
	return nil
}

// waitForPong polls addr with PING until it answers PONG, the process exits or time runs out.
func waitForPong(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(redisNodeReadyTimeout)
	for {
		err := ping(addr)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("exited before answering")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING after %v: %w", redisNodeReadyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping speaks just enough RESP to check a node without creating a client.
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

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testenv: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
