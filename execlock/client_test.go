package execlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

func TestParseNode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		node     string
		wantAddr string
		wantDB   int
		wantPass string
		wantTLS  bool
		wantErr  string // substring; empty means success
	}{
		{name: "host and port", node: "127.0.0.1:6379", wantAddr: "127.0.0.1:6379"},
		{name: "spaces trimmed", node: "  redis-a:6380 ", wantAddr: "redis-a:6380"},
		{name: "IPv6", node: "[::1]:6379", wantAddr: "[::1]:6379"},
		{name: "URL", node: "redis://:secret@redis-b:6381/2", wantAddr: "redis-b:6381", wantDB: 2, wantPass: "secret"},
		{name: "URL default port", node: "redis://redis-c", wantAddr: "redis-c:6379"},
		{name: "TLS URL", node: "rediss://redis-d:6390", wantAddr: "redis-d:6390", wantTLS: true},
		{name: "empty", node: "", wantErr: "empty address"},
		{name: "no port", node: "localhost", wantErr: "want host:port"},
		{name: "port zero", node: "localhost:0", wantErr: "port number"},
		{name: "port not a number", node: "localhost:abc", wantErr: "port number"},
		{name: "port too large", node: "localhost:70000", wantErr: "port number"},
		{name: "no host", node: ":6379", wantErr: "port number"},
		{name: "bad scheme", node: "http://localhost:6379", wantErr: "invalid URL scheme"},
		{name: "bad database", node: "redis://localhost:6379/x", wantErr: "invalid database number"},
		{name: "unknown query parameter", node: "redis://localhost:6379?bogus=1", wantErr: "bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts, err := ParseNode(tt.node)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseNode(%q) = %v, want an ErrInvalid error containing %q", tt.node, err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), "execlock: ") {
					t.Errorf("error %q lacks the package prefix", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseNode(%q): %v", tt.node, err)
			}
			if opts.Addr != tt.wantAddr || opts.DB != tt.wantDB || opts.Password != tt.wantPass || (opts.TLSConfig != nil) != tt.wantTLS {
				t.Errorf("ParseNode(%q) = addr %q db %d password %q TLS %v; want %q %d %q %v",
					tt.node, opts.Addr, opts.DB, opts.Password, opts.TLSConfig != nil,
					tt.wantAddr, tt.wantDB, tt.wantPass, tt.wantTLS)
			}
		})
	}
}

func TestNewClient(t *testing.T) {
	t.Parallel()

	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		in := &redis.Options{Addr: "127.0.0.1:1"}
		c := NewClient(in)
		defer c.Close()
		o := c.Options()
		if !o.ContextTimeoutEnabled {
			t.Error("ContextTimeoutEnabled is off")
		}
		for name, got := range map[string]time.Duration{
			"DialTimeout": o.DialTimeout, "ReadTimeout": o.ReadTimeout,
			"WriteTimeout": o.WriteTimeout, "PoolTimeout": o.PoolTimeout,
		} {
			if got != DefaultNodeTimeout {
				t.Errorf("%s = %v, want %v", name, got, DefaultNodeTimeout)
			}
		}
		if o.MaxRetries != 1 || o.DialerRetries != 1 {
			t.Errorf("MaxRetries %d, DialerRetries %d; want 1 and 1", o.MaxRetries, o.DialerRetries)
		}
		if o.MaintNotificationsConfig == nil || o.MaintNotificationsConfig.Mode != maintnotifications.ModeDisabled {
			t.Errorf("maintenance notifications not disabled: %+v", o.MaintNotificationsConfig)
		}
		if in.ContextTimeoutEnabled || in.ReadTimeout != 0 || in.MaxRetries != 0 || in.MaintNotificationsConfig != nil {
			t.Errorf("NewClient modified its argument: %+v", in)
		}
	})

	t.Run("explicit values kept", func(t *testing.T) {
		t.Parallel()
		opts, err := ParseNode("redis://127.0.0.1:1?read_timeout=2s&max_retries=-1&dial_timeout=300ms")
		if err != nil {
			t.Fatal(err)
		}
		c := NewClient(opts)
		defer c.Close()
		o := c.Options()
		if o.ReadTimeout != 2*time.Second || o.DialTimeout != 300*time.Millisecond || o.MaxRetries != 0 {
			t.Errorf("ReadTimeout %v, DialTimeout %v, MaxRetries %d; want 2s, 300ms and 0 (the URL's)",
				o.ReadTimeout, o.DialTimeout, o.MaxRetries)
		}
		if o.WriteTimeout != DefaultNodeTimeout || !o.ContextTimeoutEnabled {
			t.Errorf("WriteTimeout %v, ContextTimeoutEnabled %v; want %v and true", o.WriteTimeout, o.ContextTimeoutEnabled, DefaultNodeTimeout)
		}
	})

	t.Run("NewClients error returns no client", func(t *testing.T) {
		t.Parallel()
		clients, err := NewClients("127.0.0.1:1", "nonsense")
		if !errors.Is(err, ErrInvalid) || clients != nil {
			t.Fatalf("NewClients = %v, %v; want nil and ErrInvalid", clients, err)
		}
	})
}

// A node that refuses connections makes go-redis log a line per failed dial. NewClient routes those
// lines to slog.Default() at Debug level instead of go-redis's own stderr logger.
func TestNewClientRoutesRedisLogsToSlog(t *testing.T) {
	// Not parallel: it swaps the process's default logger, which top-level parallel tests do not
	// run alongside.
	logs := &lockedBuffer{}
	prevLogger, prevOut, prevFlags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})))
	t.Cleanup(func() {
		// Setting the original logger back does not give the log package its writer back.
		slog.SetDefault(prevLogger)
		log.SetOutput(prevOut)
		log.SetFlags(prevFlags)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: dials are refused
	c := NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	err = c.Ping(context.Background()).Err()
	if err == nil {
		t.Fatalf("PING %s answered; want a refused connection", addr)
	}
	want := fmt.Sprintf("level=DEBUG msg=\"redis: connection pool: failed to dial after 1 attempts: %v\" logger=go-redis\n", err)
	if got := logs.String(); got != want {
		t.Errorf("slog.Default() got %q\nwant %q", got, want)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
