package execlock

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/jobpipe/jobpipe/internal/keyslots"
)

// Defaults of Config.
const (
	DefaultPrefix      = "jobpipe:lock:"
	DefaultExecTTL     = 30 * time.Second
	DefaultQueueTTL    = 10 * time.Second
	DefaultCallTimeout = time.Second
)

// Limits on Config and on lock names.
const (
	// MinTTL is the shortest ExecTTL or QueueTTL: Redis expires keys with millisecond precision.
	MinTTL = 10 * time.Millisecond
	// MaxNameLen bounds Prefix, NodeName and a kind, in bytes.
	MaxNameLen = 128
	// MaxKeyLen is the longest key value used as is in a lock key, in bytes; longer ones are hashed.
	MaxKeyLen = 128
	// MaxLimit is the largest running limit (number of slots) of one key.
	MaxLimit = keyslots.Max
)

// Config configures a Locker. Zero fields take the defaults stated on each.
type Config struct {
	// Nodes are the clients of the independent Redis nodes (not a cluster, not replicas) holding the
	// locks: 1, 3 or 5 (any odd number), a majority of which hold each lock. Build them with NewClient
	// or NewClients; the Locker does not close them. Required.
	Nodes []*redis.Client
	// Prefix starts every lock key. Default DefaultPrefix ("jobpipe:lock:").
	Prefix string
	// ExecTTL is how long an execution lock lives without an extension: at most this long, a
	// worker that died blocks its key's slot. Default DefaultExecTTL (30 s).
	ExecTTL time.Duration
	// QueueTTL is how long a queue lock lives: it covers the hand-off from dispatcher to worker
	// only. Default DefaultQueueTTL (10 s).
	QueueTTL time.Duration
	// NodeName names this process in lock values ("<NodeName>:<random>"), so that a held key in
	// Redis tells who holds it. Default "<hostname>:<pid>".
	NodeName string
	// CallTimeout bounds each lock call (acquire attempt, extension, release) when nodes are down
	// or stalled, and the commands it leaves on nodes its quorum did not need; under half the
	// shorter TTL. Default DefaultCallTimeout (1 s), or a quarter of the shorter TTL when less.
	CallTimeout time.Duration
}

// resolve returns a copy of c with zero fields set to their defaults and its own copy of Nodes,
// which the caller may reuse, or an ErrInvalid error naming the first invalid field.
func (c Config) resolve() (Config, error) {
	c.Prefix = cmp.Or(c.Prefix, DefaultPrefix)
	c.ExecTTL = cmp.Or(c.ExecTTL, DefaultExecTTL)
	c.QueueTTL = cmp.Or(c.QueueTTL, DefaultQueueTTL)
	if c.NodeName == "" {
		host, _ := os.Hostname() // "" on error
		name := fmt.Sprintf("%s:%d", cmp.Or(host, "unknown"), os.Getpid())
		c.NodeName = name[max(0, len(name)-MaxNameLen):]
	}
	c.CallTimeout = cmp.Or(c.CallTimeout, min(DefaultCallTimeout, min(c.ExecTTL, c.QueueTTL)/4))
	c.Nodes = slices.Clone(c.Nodes)
	n := len(c.Nodes)
	switch {
	case n == 0:
		return c, fmt.Errorf("%w Config.Nodes: no Redis node; want 1, 3 or 5 independent nodes", ErrInvalid)
	case n%2 == 0:
		// An even count's quorum survives no more failures than one node fewer would.
		return c, fmt.Errorf("%w Config.Nodes: %d nodes; Redlock needs an odd number of independent nodes", ErrInvalid, n)
	}
	seen := make(map[string]int, n)
	for i, node := range c.Nodes {
		if node == nil {
			return c, fmt.Errorf("%w Config.Nodes[%d]: nil client", ErrInvalid, i)
		}
		o := node.Options()
		if !o.ContextTimeoutEnabled {
			return c, fmt.Errorf("%w Config.Nodes[%d] (%s): ContextTimeoutEnabled is off, so a stalled node would "+
				"block lock calls past their deadline; build the client with execlock.NewClient", ErrInvalid, i, o.Addr)
		}
		// Two databases of one server are one failure domain, so the database number is ignored.
		id := o.Network + "/" + o.Addr
		if j, dup := seen[id]; dup {
			return c, fmt.Errorf("%w Config.Nodes[%d] and [%d] are the same server (%s)", ErrInvalid, j, i, o.Addr)
		}
		seen[id] = i
	}
	shorter := min(c.ExecTTL, c.QueueTTL)
	switch {
	case max(len(c.Prefix), len(c.NodeName)) > MaxNameLen:
		return c, fmt.Errorf("%w Config.Prefix (%d bytes) or Config.NodeName (%d bytes): want at most %d bytes each",
			ErrInvalid, len(c.Prefix), len(c.NodeName), MaxNameLen)
	case shorter < MinTTL:
		return c, fmt.Errorf("%w Config.ExecTTL %v or Config.QueueTTL %v: want at least %v each",
			ErrInvalid, c.ExecTTL, c.QueueTTL, MinTTL)
	case c.CallTimeout <= 0 || 2*c.CallTimeout >= shorter:
		// A lock must stay valid well past the call that took or extended it.
		return c, fmt.Errorf("%w Config.CallTimeout %v: want a positive duration less than half the shorter TTL (%v)",
			ErrInvalid, c.CallTimeout, shorter)
	}
	return c, nil
}

// DefaultNodeTimeout is NewClient's dial, read, write and pool timeout: half of DefaultCallTimeout,
// so that its one retry still fits in a lock call.
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
	if p, _ := strconv.Atoi(port); p < 1 || p > 65535 || host == "" { // 0 when port is not a number
		return nil, fmt.Errorf("%w Redis node %q: want host:port with a port number from 1 to 65535", ErrInvalid, node)
	}
	return &redis.Options{Addr: node}, nil
}

// NewClient returns a client for one lock node from a copy of opts, with what lock calls need where
// opts leaves it unset: DefaultNodeTimeout for dial, read, write and pool; one retry (a quorum masks a
// failing node); no maintenance notifications or CLIENT SETINFO, for fewer round trips when a node
// comes back. ContextTimeoutEnabled is always on, lest one stalled node stall every lock call. The
// caller closes the client. The first call routes go-redis's process-wide logger (a line per failed
// dial) to slog.Default() at Debug level, logger=go-redis; redis.SetLogger after it overrides that.
func NewClient(opts *redis.Options) *redis.Client {
	routeRedisLogs()
	o := *opts
	o.ContextTimeoutEnabled, o.DisableIdentity = true, true
	for _, d := range []*time.Duration{&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout} {
		*d = cmp.Or(*d, DefaultNodeTimeout)
	}
	o.MaxRetries, o.DialerRetries = cmp.Or(o.MaxRetries, 1), cmp.Or(o.DialerRetries, 1)
	o.MaxRetryBackoff = cmp.Or(o.MaxRetryBackoff, 100*time.Millisecond)
	o.MaintNotificationsConfig = cmp.Or(o.MaintNotificationsConfig, &maintnotifications.Config{Mode: maintnotifications.ModeDisabled})
	return redis.NewClient(&o)
}

// routeRedisLogs sets go-redis's process-wide logger once (see NewClient).
var routeRedisLogs = sync.OnceFunc(func() { redis.SetLogger(slogRedisLogger{}) })

// slogRedisLogger passes go-redis's lines to slog.Default(), looked up per line so a later one applies.
type slogRedisLogger struct{}

// Printf logs one go-redis line.
func (slogRedisLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().DebugContext(ctx, fmt.Sprintf(format, v...), "logger", "go-redis")
}

// NewClients parses each node (see ParseNode) and returns a NewClient client for each, in order;
// none when a node does not parse.
func NewClients(nodes ...string) ([]*redis.Client, error) {
	opts := make([]*redis.Options, len(nodes))
	for i, n := range nodes {
		var err error
		if opts[i], err = ParseNode(n); err != nil {
			return nil, err
		}
	}
	clients := make([]*redis.Client, len(opts))
	for i, o := range opts {
		clients[i] = NewClient(o)
	}
	return clients, nil
}
