package execlock

import (
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobpipe/jobpipe/internal/keyslots"
)

// Defaults of Config, exported for documentation and tests.
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
	// MaxKeyLen is the longest key value used as is in a lock key, in bytes; a longer one is
	// replaced by its SHA-256 (see the package documentation).
	MaxKeyLen = 128
	// MaxLimit is the largest running limit (number of slots) of one key.
	MaxLimit = keyslots.Max
)

// Config configures a Locker. Zero fields take the defaults stated on each.
type Config struct {
	// Nodes are the clients of the independent Redis nodes (not a cluster, not replicas of one
	// another) that hold the locks: 1, 3 or 5 (any odd number is accepted). A lock is held when
	// a majority of them, the quorum, hold it. Build them with NewClient or NewClients: each
	// must have ContextTimeoutEnabled, or a stalled node could hold a call past its deadline.
	// New adds a hook to each that changes only the Locker's own commands (see the package
	// documentation). The Locker does not close them. Required.
	Nodes []*redis.Client
	// Prefix starts every lock key. Default DefaultPrefix ("jobpipe:lock:").
	Prefix string
	// ExecTTL is how long an execution lock lives without an extension. A worker that dies
	// blocks its key's slot this long at most; heartbeats extend it (by default every
	// ExecTTL/3). Default DefaultExecTTL (30 s).
	ExecTTL time.Duration
	// QueueTTL is how long a queue lock lives: it covers the hand-off from dispatcher to worker
	// only. Default DefaultQueueTTL (10 s).
	QueueTTL time.Duration
	// NodeName names this process in lock values ("<NodeName>:<random>"), so that a held key in
	// Redis tells who holds it. Default "<hostname>:<pid>".
	NodeName string
	// CallTimeout bounds each lock call: an acquire attempt, an extension, a release. With healthy
	// nodes a call takes a round trip; the timeout only matters when nodes are down or stalled.
	// Commands a call leaves running (to the nodes its quorum did not need) end by the same
	// deadline. It must be under half the shorter TTL. Default DefaultCallTimeout (1 s), or a
	// quarter of the shorter TTL when that is less.
	CallTimeout time.Duration
}

// withDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.ExecTTL == 0 {
		c.ExecTTL = DefaultExecTTL
	}
	if c.QueueTTL == 0 {
		c.QueueTTL = DefaultQueueTTL
	}
	if c.NodeName == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "unknown"
		}
		c.NodeName = fmt.Sprintf("%s:%d", host, os.Getpid())
		if len(c.NodeName) > MaxNameLen {
			c.NodeName = c.NodeName[len(c.NodeName)-MaxNameLen:]
		}
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = min(DefaultCallTimeout, min(c.ExecTTL, c.QueueTTL)/4)
	}
	return c
}

// validate checks a Config that went through withDefaults.
func (c Config) validate() error {
	n := len(c.Nodes)
	switch {
	case n == 0:
		return fmt.Errorf("%w Config.Nodes: no Redis node; want 1, 3 or 5 independent nodes", ErrInvalid)
	case n%2 == 0:
		return fmt.Errorf("%w Config.Nodes: %d Redis nodes; Redlock needs an odd number of independent nodes "+
			"(1, 3 or 5): with %d, a quorum of %d survives no more failures than %d nodes would",
			ErrInvalid, n, n, n/2+1, n-1)
	}
	seen := make(map[string]int, n)
	for i, node := range c.Nodes {
		if node == nil {
			return fmt.Errorf("%w Config.Nodes[%d]: nil client", ErrInvalid, i)
		}
		o := node.Options()
		if !o.ContextTimeoutEnabled {
			return fmt.Errorf("%w Config.Nodes[%d] (%s): ContextTimeoutEnabled is off, so a stalled node "+
				"would block lock calls past their deadline; build the client with execlock.NewClient",
				ErrInvalid, i, o.Addr)
		}
		// Two databases of one server are one failure domain, so the database number is ignored.
		id := o.Network + "/" + o.Addr
		if j, dup := seen[id]; dup {
			return fmt.Errorf("%w Config.Nodes[%d] and [%d] are the same server (%s): "+
				"Redlock needs independent nodes", ErrInvalid, j, i, o.Addr)
		}
		seen[id] = i
	}
	switch {
	case len(c.Prefix) > MaxNameLen:
		return fmt.Errorf("%w Config.Prefix: %d bytes, at most %d", ErrInvalid, len(c.Prefix), MaxNameLen)
	case len(c.NodeName) > MaxNameLen:
		return fmt.Errorf("%w Config.NodeName: %d bytes, at most %d", ErrInvalid, len(c.NodeName), MaxNameLen)
	case c.ExecTTL < MinTTL:
		return fmt.Errorf("%w Config.ExecTTL %v: want at least %v", ErrInvalid, c.ExecTTL, MinTTL)
	case c.QueueTTL < MinTTL:
		return fmt.Errorf("%w Config.QueueTTL %v: want at least %v", ErrInvalid, c.QueueTTL, MinTTL)
	case c.CallTimeout <= 0:
		return fmt.Errorf("%w Config.CallTimeout %v: want a positive duration", ErrInvalid, c.CallTimeout)
	case 2*c.CallTimeout >= min(c.ExecTTL, c.QueueTTL):
		return fmt.Errorf("%w Config.CallTimeout %v: want less than half the shorter TTL (%v): "+
			"a lock must stay valid well past the call that took or extended it",
			ErrInvalid, c.CallTimeout, min(c.ExecTTL, c.QueueTTL))
	}
	return nil
}
