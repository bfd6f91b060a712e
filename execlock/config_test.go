package execlock

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// offlineClients returns n clients of distinct addresses that nothing listens on: New never
// connects, so they suffice to test configuration.
func offlineClients(t *testing.T, n int) []*redis.Client {
	t.Helper()
	clients := make([]*redis.Client, n)
	for i := range clients {
		clients[i] = NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", 1+i)})
	}
	t.Cleanup(func() { _ = closeAll(clients) })
	return clients
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	l, err := New(&Config{Nodes: offlineClients(t, 3)})
	if err != nil {
		t.Fatal(err)
	}
	c := l.cfg
	if c.Prefix != DefaultPrefix || c.ExecTTL != DefaultExecTTL || c.QueueTTL != DefaultQueueTTL || c.CallTimeout != DefaultCallTimeout {
		t.Errorf("defaults: prefix %q exec %v queue %v call %v", c.Prefix, c.ExecTTL, c.QueueTTL, c.CallTimeout)
	}
	if want := fmt.Sprintf(":%d", os.Getpid()); !strings.HasSuffix(c.NodeName, want) {
		t.Errorf("NodeName %q, want host%s", c.NodeName, want)
	}
	if l.Quorum() != 2 {
		t.Errorf("Quorum() = %d, want 2", l.Quorum())
	}

	short, err := New(&Config{Nodes: offlineClients(t, 1), ExecTTL: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := short.cfg.CallTimeout; got != 75*time.Millisecond {
		t.Errorf("CallTimeout with ExecTTL 300ms = %v, want a quarter of it, 75ms", got)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	one := offlineClients(t, 1)
	three := offlineClients(t, 3)
	noCtx := redis.NewClient(&redis.Options{Addr: "127.0.0.1:9"})
	t.Cleanup(func() { _ = noCtx.Close() })
	sameServer := NewClient(&redis.Options{Addr: three[0].Options().Addr, DB: 5})
	t.Cleanup(func() { _ = sameServer.Close() })

	tests := []struct {
		name    string
		cfg     *Config
		wantErr string
	}{
		{name: "nil", cfg: nil, wantErr: "nil Config"},
		{name: "no nodes", cfg: &Config{}, wantErr: "no Redis node"},
		{name: "two nodes", cfg: &Config{Nodes: three[:2]}, wantErr: "Redlock needs an odd number of independent nodes"},
		{name: "four nodes", cfg: &Config{Nodes: append(offlineClients(t, 1), three...)}, wantErr: "odd number"},
		{name: "nil client", cfg: &Config{Nodes: []*redis.Client{one[0], nil, three[1]}}, wantErr: "Nodes[1]: nil client"},
		{name: "no context timeouts", cfg: &Config{Nodes: []*redis.Client{noCtx}}, wantErr: "ContextTimeoutEnabled is off"},
		{name: "same server twice", cfg: &Config{Nodes: []*redis.Client{three[0], three[1], sameServer}}, wantErr: "same server"},
		{name: "negative TTL", cfg: &Config{Nodes: one, ExecTTL: -time.Second}, wantErr: "Config.ExecTTL"},
		{name: "tiny TTL", cfg: &Config{Nodes: one, QueueTTL: time.Millisecond}, wantErr: "Config.QueueTTL"},
		{name: "negative call timeout", cfg: &Config{Nodes: one, CallTimeout: -1}, wantErr: "Config.CallTimeout"},
		{name: "call timeout too long", cfg: &Config{Nodes: one, QueueTTL: time.Second, CallTimeout: 500 * time.Millisecond}, wantErr: "less than half the shorter TTL"},
		{name: "long prefix", cfg: &Config{Nodes: one, Prefix: strings.Repeat("p", MaxNameLen+1)}, wantErr: "Config.Prefix"},
		{name: "long node name", cfg: &Config{Nodes: one, NodeName: strings.Repeat("n", MaxNameLen+1)}, wantErr: "Config.NodeName"},
		{name: "valid five", cfg: &Config{Nodes: offlineClients(t, 5), ExecTTL: time.Minute, QueueTTL: time.Second, CallTimeout: 400 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tt.cfg)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "execlock: ") {
				t.Fatalf("New = %v; want an ErrInvalid error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestConfigNodesCopied(t *testing.T) {
	t.Parallel()
	nodes := append([]*redis.Client(nil), offlineClients(t, 1)...)
	l, err := New(&Config{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	nodes[0] = nil
	if l.cfg.Nodes[0] == nil {
		t.Error("New kept the caller's slice")
	}
}
