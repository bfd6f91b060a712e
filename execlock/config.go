package execlock

import (
	"cmp"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

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
	// MaxKeyLen is the longest key value used as is in a lock key, in bytes; a longer one is
	// replaced by its SHA-256.
	MaxKeyLen = 128
	// MaxLimit is the largest running limit (number of slots) of one key.
	MaxLimit = keyslots.Max
)

// Config configures a Locker. Zero fields take the defaults stated on each.
type Config struct {
	// Nodes are the clients of the independent Redis nodes (not a cluster, not replicas) that
	// hold the locks: 1, 3 or 5 (any odd number); a lock is held on a majority, the quorum. Build
	// them with NewClient or NewClients (New requires ContextTimeoutEnabled). New adds a hook to
	// each that changes only the Locker's own commands; it does not close them. Required.
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
	// CallTimeout bounds each lock call (an acquire attempt, an extension, a release) when nodes
	// are down or stalled, and the commands it leaves running on the nodes its quorum did not
	// need. It must be under half the shorter TTL. Default DefaultCallTimeout (1 s), or a quarter
	// of the shorter TTL when that is less.
	CallTimeout time.Duration
}

// withDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	setIfZero(&c.Prefix, DefaultPrefix)
	setIfZero(&c.ExecTTL, DefaultExecTTL)
	setIfZero(&c.QueueTTL, DefaultQueueTTL)
	if c.NodeName == "" {
		host, _ := os.Hostname() // "" on error
		name := fmt.Sprintf("%s:%d", cmp.Or(host, "unknown"), os.Getpid())
		c.NodeName = name[max(0, len(name)-MaxNameLen):]
	}
	setIfZero(&c.CallTimeout, min(DefaultCallTimeout, min(c.ExecTTL, c.QueueTTL)/4))
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
