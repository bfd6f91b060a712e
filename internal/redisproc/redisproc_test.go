package redisproc

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStartKillAndPortInUse(t *testing.T) {
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := Start(ctx, bin, t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Kill()
	if s.Pid() <= 0 || !strings.HasPrefix(s.Addr, "127.0.0.1:") || ping(s.Addr) != nil {
		t.Fatalf("started server %+v (pid %d) does not answer", s, s.Pid())
	}
	// Paused, it answers nothing; resumed, it answers again.
	if err := s.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if ping(s.Addr) == nil {
		t.Error("a stopped server answered PING")
	}
	if err := s.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := ping(s.Addr); err != nil {
		t.Errorf("resumed server: %v", err)
	}
	// A second server on the same port fails, and says why from its own log.
	if _, err := Start(ctx, bin, t.TempDir(), s.Port); err == nil || !strings.Contains(err.Error(), "its log:") {
		t.Errorf("second server on port %d: err = %v", s.Port, err)
	}
	s.Kill()
	s.Kill() // killing an exited server does nothing
	deadline := time.Now().Add(2 * time.Second)
	for ping(s.Addr) == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if ping(s.Addr) == nil {
		t.Error("a killed server still answers")
	}
}
