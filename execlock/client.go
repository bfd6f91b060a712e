package execlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// DefaultNodeTimeout is NewClient's dial, read, write and pool timeout: half of
// DefaultCallTimeout, so that the one retry it allows still fits in a lock call.
const DefaultNodeTimeout = 500 * time.Millisecond

// ParseNode parses the address of one lock node: "host:port", or a URL "redis://[user:password@]
// host[:port][/db]" ("rediss://" for TLS, "unix:///path" for a socket) with go-redis's query
// parameters, whose settings NewClient keeps.
func ParseNode(node string) (*redis.Options, error) {
	node = strings.TrimSpace(node)
	switch {
	case node == "":
		return nil, fmt.Errorf("%w Redis node: empty address", ErrInvalid)
	case strings.Contains(node, "://"):
		opts, err := redis.ParseURL(node)
		if err != nil {
			return nil, fmt.Errorf("%w Redis node URL: %w", ErrInvalid, err)
		}
		return opts, nil
	}
	host, port, err := net.SplitHostPort(node)
	if err != nil {
		return nil, fmt.Errorf("%w Redis node %q: want host:port or redis://host:port[/db]: %w", ErrInvalid, node, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || host == "" {
		return nil, fmt.Errorf("%w Redis node %q: want host:port with a port number from 1 to 65535", ErrInvalid, node)
	}
	return &redis.Options{Addr: node}, nil
}

// NewClient returns a client for one lock node, built from a copy of opts with what lock calls
// need where opts leaves it unset: DefaultNodeTimeout as dial, read, write and pool timeout;
// MaxRetries and DialerRetries 1, since a quorum of other nodes already masks a failing one (the
// retry covers a pooled connection to a restarted node); no maintenance notifications and no
// CLIENT SETINFO, for fewer round trips when a node comes back. ContextTimeoutEnabled is always
// on: without it go-redis ignores a context's deadline on socket I/O, and one stalled node would
// stall every lock call. The caller closes the client.
//
// The first NewClient of the process routes go-redis's process-wide logger, which prints a line
// for every failed dial, to slog.Default() at Debug level with logger=go-redis, since jobpipe's
// dispatcher reports the nodes that do not answer itself; call redis.SetLogger after it to route
// them elsewhere.
func NewClient(opts *redis.Options) *redis.Client {
	routeRedisLogs()
	o := *opts
	o.ContextTimeoutEnabled, o.DisableIdentity = true, true
	for _, d := range []*time.Duration{&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout} {
		setIfZero(d, DefaultNodeTimeout)
	}
	setIfZero(&o.MaxRetries, 1)
	setIfZero(&o.DialerRetries, 1)
	setIfZero(&o.MaxRetryBackoff, 100*time.Millisecond)
	setIfZero(&o.MaintNotificationsConfig, &maintnotifications.Config{Mode: maintnotifications.ModeDisabled})
	return redis.NewClient(&o)
}

func setIfZero[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// routeRedisLogs sets go-redis's process-wide logger once (see NewClient).
var routeRedisLogs = sync.OnceFunc(func() { redis.SetLogger(slogRedisLogger{}) })

// slogRedisLogger passes go-redis's lines to slog.Default(), looked up for each line so that a
// default logger set later applies.
type slogRedisLogger struct{}

// Printf logs one go-redis line.
func (slogRedisLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().DebugContext(ctx, fmt.Sprintf(format, v...), "logger", "go-redis")
}

// NewClients parses each node (see ParseNode) and returns a NewClient client for each, in order.
// On error it closes the clients it made and returns none.
func NewClients(nodes ...string) ([]*redis.Client, error) {
	clients := make([]*redis.Client, 0, len(nodes))
	for _, n := range nodes {
		opts, err := ParseNode(n)
		if err != nil {
			return nil, errors.Join(err, closeAll(clients))
		}
		clients = append(clients, NewClient(opts))
	}
	return clients, nil
}

func closeAll(clients []*redis.Client) error {
	var errs []error
	for _, c := range clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
