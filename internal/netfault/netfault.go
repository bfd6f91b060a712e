// Package netfault puts a TCP proxy between clients and one server so that a test can make the
// network between them misbehave, and heal it again: add latency, hold everything as a silent
// partition does, or cut every connection. The proxy is Shopify's toxiproxy, run inside the test's
// own process (no toxiproxy server, no HTTP API): a Link is one toxiproxy proxy and the toxics it
// has in force.
//
// Clients that should see the fault connect to Link.Addr instead of the server's address; clients
// that should not keep connecting to the server itself. The fault suite gives a worker process its
// PostgreSQL and Redis addresses through links, so that one worker can be partitioned while the
// others, and the test's own witness connections, are not.
package netfault

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// holdFor is the latency a hold gives every byte: far longer than any test runs, so that nothing
// passes until Heal removes it. toxiproxy's latency toxic hands over what it holds when it is removed,
// so a hold loses no data, as TCP's retransmissions lose none across a partition that heals.
const holdFor = 24 * time.Hour

// The toxics' names, one per direction: upstream is client to server, downstream server to client.
var directions = []string{"upstream", "downstream"}

// A Link is a proxy in front of one server. Its zero value is not usable; Start makes one. A Link is
// safe for concurrent use.
type Link struct {
	name     string
	upstream string
	proxy    *toxiproxy.Proxy

	mu     sync.Mutex
	toxics []string // names of the toxics in force
	cut    bool     // the proxy is stopped: connections closed, new ones refused
	closed bool
}

// Start starts a link to the server at upstream (host:port), listening on a free port of 127.0.0.1.
// name says what the link is for in errors. Close stops it.
func Start(name, upstream string) (*Link, error) {
	if strings.TrimSpace(upstream) == "" {
		return nil, fmt.Errorf("netfault: link %q: no upstream address; give the server's host:port", name)
	}
	// A server of the proxy's own, never listening: toxiproxy's proxies need one for their metrics
	// (none is registered) and logger (none: the faults are the test's to report).
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(server, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("netfault: link %q to %s: %w", name, upstream, err)
	}
	return &Link{name: name, upstream: upstream, proxy: p}, nil
}

// Addr is the address clients connect to instead of the server's: host:port on 127.0.0.1. It stays
// the same across Cut and Heal.
func (l *Link) Addr() string {
	l.proxy.Lock()
	defer l.proxy.Unlock()
	return l.proxy.Listen
}

// Upstream is the server's address.
func (l *Link) Upstream() string { return l.upstream }

// Delay makes every byte take latency (plus or minus up to jitter) longer each way, on the
// connections open now and on new ones, until Heal. Round trips take twice latency longer. Delay
// replaces a delay in force; it may not be combined with Hold.
func (l *Link) Delay(latency, jitter time.Duration) error {
	if latency <= 0 || jitter < 0 || jitter > latency {
		return fmt.Errorf("netfault: link %q: delay %v ± %v; want a positive latency and a jitter between 0 and it", l.name, latency, jitter)
	}
	return l.set("latency", map[string]int64{"latency": latency.Milliseconds(), "jitter": jitter.Milliseconds()})
}

// Hold stops everything from passing either way, as a partition that drops every packet does: the
// connections stay open, new ones are accepted, and no byte reaches the other side until Heal, when
// everything held is delivered (as TCP delivers after a partition heals, if neither side has given
// up the connection by then). A client learns of a hold only through its own timeouts.
func (l *Link) Hold() error {
	return l.set("latency", map[string]int64{"latency": holdFor.Milliseconds()})
}

// Cut closes every connection through the link and refuses new ones until Heal: a client sees its
// connections end and its connects fail at once.
func (l *Link) Cut() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("netfault: link %q is closed", l.name)
	}
	if err := l.clear(); err != nil {
		return err
	}
	if !l.cut {
		l.proxy.Stop()
		l.cut = true
	}
	return nil
}

// Heal ends the fault in force, if any: toxics are removed (what a hold held is delivered) and a cut
// link accepts connections again, on the same address.
func (l *Link) Heal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.heal()
}

// Close stops the link: its connections are closed and its port released. Close is idempotent.
func (l *Link) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	_ = l.clear()
	l.proxy.Stop()
}

// toxic is how toxiproxy reads a toxic's settings.
type toxic struct {
	Name       string           `json:"name"`
	Type       string           `json:"type"`
	Stream     string           `json:"stream"`
	Toxicity   float32          `json:"toxicity"`
	Attributes map[string]int64 `json:"attributes"`
}

// set puts toxic typ with attrs in force in both directions, in place of whatever fault was in force.
func (l *Link) set(typ string, attrs map[string]int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.heal(); err != nil {
		return err
	}
	for _, dir := range directions {
		t := toxic{Name: typ + "-" + dir, Type: typ, Stream: dir, Toxicity: 1, Attributes: attrs}
		js, err := json.Marshal(t)
		if err != nil {
			return fmt.Errorf("netfault: link %q: %s: %w", l.name, t.Name, err)
		}
		if _, err := l.proxy.Toxics.AddToxicJson(bytes.NewReader(js)); err != nil {
			return fmt.Errorf("netfault: link %q: adding %s: %w", l.name, t.Name, err)
		}
		l.toxics = append(l.toxics, t.Name)
	}
	return nil
}

// heal removes the toxics in force and opens a cut link again. The caller holds l.mu.
func (l *Link) heal() error {
	if l.closed {
		return fmt.Errorf("netfault: link %q is closed", l.name)
	}
	if err := l.clear(); err != nil {
		return err
	}
	if l.cut {
		if err := l.proxy.Start(); err != nil {
			return fmt.Errorf("netfault: link %q: listening again on %s: %w", l.name, l.proxy.Listen, err)
		}
		l.cut = false
	}
	return nil
}

// clear removes the toxics in force. The caller holds l.mu.
func (l *Link) clear() error {
	for len(l.toxics) > 0 {
		name := l.toxics[len(l.toxics)-1]
		if err := l.proxy.Toxics.RemoveToxic(context.Background(), name); err != nil {
			return fmt.Errorf("netfault: link %q: removing %s: %w", l.name, name, err)
		}
		l.toxics = l.toxics[:len(l.toxics)-1]
	}
	return nil
}
