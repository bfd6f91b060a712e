package netfault_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/internal/netfault"
)

// echoServer starts a TCP server on 127.0.0.1 that writes back every line it reads, until the test
// ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// startLink starts a link to upstream, closed when the test ends.
func startLink(t *testing.T, upstream string) *netfault.Link {
	t.Helper()
	l, err := netfault.Start("test", upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// client is one connection through a link.
type client struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, conn: c, r: bufio.NewReader(c)}
}

func (c *client) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, line+"\n"); err != nil {
		c.t.Fatalf("write %q: %v", line, err)
	}
}

// read reads one line, waiting at most within.
func (c *client) read(within time.Duration) (string, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(within))
	s, err := c.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

// roundTrip sends line and returns how long its echo took.
func (c *client) roundTrip(line string) time.Duration {
	c.t.Helper()
	began := time.Now()
	c.send(line)
	got, err := c.read(5 * time.Second)
	if err != nil || got != line {
		c.t.Fatalf("echo of %q: %q, %v", line, got, err)
	}
	return time.Since(began)
}

func TestDelayAddsLatencyBothWaysUntilHealed(t *testing.T) {
	l := startLink(t, echoServer(t))
	c := dial(t, l.Addr())
	if took := c.roundTrip("before"); took > 100*time.Millisecond {
		t.Fatalf("a round trip through a healthy link took %v", took)
	}
	if err := l.Delay(60*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	// Each direction is delayed: a round trip takes at least twice the latency, on an open
	// connection and on a new one.
	if took := c.roundTrip("delayed"); took < 120*time.Millisecond {
		t.Errorf("a round trip with 60ms each way took %v, want at least 120ms", took)
	}
	if took := dial(t, l.Addr()).roundTrip("new"); took < 120*time.Millisecond {
		t.Errorf("a new connection's round trip with 60ms each way took %v, want at least 120ms", took)
	}
	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}
	if took := c.roundTrip("healed"); took > 100*time.Millisecond {
		t.Errorf("a round trip after Heal took %v", took)
	}
}

func TestHoldPassesNothingThenDeliversEverythingInOrder(t *testing.T) {
	l := startLink(t, echoServer(t))
	c := dial(t, l.Addr())
	c.roundTrip("before")
	if err := l.Hold(); err != nil {
		t.Fatal(err)
	}
	c.send("one")
	c.send("two")
	// A connection opened during the hold is accepted, and held like the others.
	n := dial(t, l.Addr())
	n.send("new")
	for _, x := range []*client{c, n} {
		if got, err := x.read(300 * time.Millisecond); !isTimeout(err) || got != "" {
			t.Fatalf("read during the hold: %q, %v; want nothing until the deadline", got, err)
		}
	}
	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"one", "two"} {
		if got, err := c.read(2 * time.Second); err != nil || got != want {
			t.Fatalf("after Heal: %q, %v; want %q: what was held is delivered, in order", got, err, want)
		}
	}
	if got, err := n.read(2 * time.Second); err != nil || got != "new" {
		t.Fatalf("the connection opened during the hold, after Heal: %q, %v; want %q", got, err, "new")
	}
	if took := c.roundTrip("after"); took > 100*time.Millisecond {
		t.Errorf("a round trip after Heal took %v", took)
	}
}

// isTimeout tells whether err is a read deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestCutEndsConnectionsAndRefusesNewOnesUntilHealed(t *testing.T) {
	l := startLink(t, echoServer(t))
	addr := l.Addr()
	c := dial(t, addr)
	c.roundTrip("before")
	if err := l.Delay(20*time.Millisecond, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := l.Cut(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if got, err := c.read(2 * time.Second); err == nil || isTimeout(err) {
		t.Fatalf("read on a cut connection: %q, %v; want the connection ended, not a timeout", got, err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("a cut connection ended after %v, want at once", took)
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("dial %s while cut: connected, want refused", addr)
	}
	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}
	if l.Addr() != addr {
		t.Fatalf("address after Heal %s, want the same as before, %s", l.Addr(), addr)
	}
	// The delay was removed by the cut: a healed link is a healthy one.
	if took := dial(t, addr).roundTrip("healed"); took > 100*time.Millisecond {
		t.Errorf("a round trip after Heal took %v", took)
	}
}

func TestBadUse(t *testing.T) {
	if _, err := netfault.Start("redis", " "); err == nil || !strings.Contains(err.Error(), "host:port") {
		t.Errorf("Start with no upstream: %v; want an error asking for host:port", err)
	}
	l := startLink(t, echoServer(t))
	for _, c := range []struct{ latency, jitter time.Duration }{{0, 0}, {-time.Second, 0}, {time.Second, 2 * time.Second}, {time.Second, -1}} {
		if err := l.Delay(c.latency, c.jitter); err == nil || !strings.Contains(err.Error(), "want a positive latency") {
			t.Errorf("Delay(%v, %v): %v; want it refused", c.latency, c.jitter, err)
		}
	}
	l.Close()
	l.Close()
	for name, op := range map[string]func() error{"Hold": l.Hold, "Cut": l.Cut, "Heal": l.Heal} {
		if err := op(); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("%s after Close: %v; want an error saying the link is closed", name, err)
		}
	}
}

func TestCloseLeavesNoGoroutine(t *testing.T) {
	upstream := echoServer(t)
	before := runtime.NumGoroutine()
	l, err := netfault.Start("test", upstream)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, l.Addr())
	c.roundTrip("x")
	if err := l.Hold(); err != nil {
		t.Fatal(err)
	}
	c.send("held")
	l.Close()
	c.conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+1 { // +1: the echo server's handler of c, ending with it
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
