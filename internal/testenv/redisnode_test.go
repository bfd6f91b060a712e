package testenv

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"
)

func TestStartRedisNodes(t *testing.T) {
	t.Parallel()
	var pids []int
	t.Run("use", func(t *testing.T) {
		nodes := StartRedisNodes(t, 2)
		if nodes[0].Addr == nodes[1].Addr {
			t.Fatalf("both nodes on %s", nodes[0].Addr)
		}
		for _, n := range nodes {
			pids = append(pids, n.Pid())
		}
		n := nodes[0]
		c := n.Client()
		ctx := context.Background()
		if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}

		n.Pause()
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		start := time.Now()
		err := c.Ping(short).Err()
		cancel()
		if err == nil {
			t.Error("a paused node answered PING")
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("PING to a paused node took %v: the client should give up with its context", d)
		}

		n.Resume()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Errorf("PING after Resume: %v", err)
		}
		if got, _ := c.Get(ctx, "k").Result(); got != "v" {
			t.Errorf("after Pause/Resume k = %q, want v", got)
		}

		oldPid := n.Pid()
		n.Kill()
		if n.Pid() != 0 {
			t.Errorf("Pid after Kill = %d, want 0", n.Pid())
		}
		if err := c.Ping(ctx).Err(); err == nil {
			t.Error("a killed node answered PING")
		}
		assertGone(t, oldPid)

		addr := n.Addr
		n.Restart(t)
		if n.Addr != addr {
			t.Errorf("Restart moved the node from %s to %s", addr, n.Addr)
		}
		if n.Pid() == 0 || n.Pid() == oldPid {
			t.Errorf("Pid after Restart = %d (was %d): want a new process", n.Pid(), oldPid)
		}
		pids[0] = n.Pid()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Errorf("PING after Restart: %v", err)
		}
		if n, _ := c.Exists(ctx, "k").Result(); n != 0 {
			t.Error("k survived Restart: want an empty node")
		}

		nodes[1].Pause() // the cleanup must kill a stopped node too
	})
	for _, pid := range pids {
		assertGone(t, pid)
	}
}

// assertGone checks that no process pid exists (it was killed and reaped).
func assertGone(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d still exists after it was killed (kill -0: %v)", pid, err)
	}
}
