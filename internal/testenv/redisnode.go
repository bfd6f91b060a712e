package testenv

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/jobpipe/jobpipe/internal/redisproc"
)

// RedisNode is a redis-server process that belongs to one test: no persistence, bound to
// 127.0.0.1 on a free port, not daemonized (so its pid is ours to signal). It is killed when the
// test ends, whatever the outcome.
type RedisNode struct {
	// Addr is the node's 127.0.0.1:port; it stays the same across Restart.
	Addr string

	t   testing.TB
	bin string
	dir string

	mu      sync.Mutex
	proc    *redisproc.Server // the running process, nil after Kill
	port    int
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
	bin, err := redisproc.Binary()
	if err != nil {
		t.Fatalf("testenv: %v, to run the tests that start their own Redis nodes", err)
	}
	nodes := make([]*RedisNode, 0, n)
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.stop()
		}
	})
	for range n {
		nd := &RedisNode{t: t, bin: bin, dir: t.TempDir()}
		if err := nd.startLocked(0); err != nil {
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
	if n.proc == nil {
		return 0
	}
	return n.proc.Pid()
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
	if n.proc == nil {
		n.t.Errorf("testenv: redis node %s: %v: not running", n.Addr, sig)
		return
	}
	if err := n.proc.Signal(sig); err != nil {
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
	if n.proc == nil {
		return
	}
	n.proc.Kill()
	n.proc = nil
}

// startLocked starts redis-server on port (0: a free one) and waits until it answers PING.
func (n *RedisNode) startLocked(port int) error {
	proc, err := redisproc.Start(context.Background(), n.bin, n.dir, port)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	n.proc, n.port = proc, proc.Port
	if n.Addr != proc.Addr { // only on the first start: tests may read Addr during a Restart
		n.Addr = proc.Addr
	}
	return nil
}
