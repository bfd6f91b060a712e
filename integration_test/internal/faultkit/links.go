package faultkit

// Network links (internal/netfault) between a worker and its servers, and round trips through them.

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/jobpipe/jobpipe/internal/netfault"
)

// StartLink starts a netfault link to upstream for t, closed when t ends.
func StartLink(t *testing.T, name, upstream string) *netfault.Link {
	t.Helper()
	l, err := netfault.Start(name, upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// PostgresAddr is the host:port of the PostgreSQL server a URL names.
func PostgresAddr(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("the test's database URL: %v", err)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" || strings.HasPrefix(host, "/") {
		t.Skipf("the database URL %q names no TCP host, which a link needs", rawURL)
	}
	if port == "" {
		port = "5432"
	}
	return net.JoinHostPort(host, port)
}

// Via is rawURL with its host and port replaced by addr: the same database, through a link.
func Via(t *testing.T, rawURL, addr string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("the test's database URL: %v", err)
	}
	u.Host = addr
	return u.String()
}

// RoundTrip times one round trip through link: a SELECT 1 when dbURL (the database's URL through
// the link) is given, else a PING (the link leads to Redis).
func RoundTrip(t *testing.T, link *netfault.Link, dbURL string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if dbURL == "" {
		c := redis.NewClient(&redis.Options{Addr: link.Addr(), ReadTimeout: 10 * time.Second, ContextTimeoutEnabled: true})
		defer c.Close()
		if err := c.Ping(ctx).Err(); err != nil { // connects first, so that only the PING is timed below
			t.Fatalf("PING through %s: %v", link.Addr(), err)
		}
		began := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING through %s: %v", link.Addr(), err)
		}
		return time.Since(began)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connecting through %s: %v", link.Addr(), err)
	}
	defer conn.Close(context.Background())
	began := time.Now()
	if _, err := conn.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatalf("SELECT 1 through %s: %v", link.Addr(), err)
	}
	return time.Since(began)
}
