package faultkit

// Names for a test's worker processes as PostgreSQL sees them, so that what each sends can be told
// apart from every other test's on the shared server.

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
)

// AppNames names a scenario's worker processes for PostgreSQL: each connects with application_name
// "<tag>-<node>", the tag random per test, so that the statements a worker sends can be told apart
// from every other test's on the shared server.
type AppNames struct{ tag string }

// NewAppNames gives a test's workers a tag of their own.
func NewAppNames() AppNames { return AppNames{tag: fmt.Sprintf("wf%06x", rand.N(1<<24))} }

// App is the application_name of node.
func (n AppNames) App(node string) string { return n.tag + "-" + node }

// Node is the node of an application_name, or "" if it is none of the scenario's workers.
func (n AppNames) Node(app string) string {
	node, ok := strings.CutPrefix(app, n.tag+"-")
	if !ok {
		return ""
	}
	return node
}

// Settings are e's worker settings for node, connecting with node's application_name.
func (n AppNames) Settings(t *testing.T, e *World, node string) WorkerSettings {
	t.Helper()
	s := e.WorkerSettings(node)
	u, err := url.Parse(s.DatabaseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		s.DatabaseURL += " application_name=" + n.App(node)
		return s
	}
	q := u.Query()
	q.Set("application_name", n.App(node))
	// As testenv does: Encode writes a space as "+", which libpq and pgx read as a plus sign.
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	s.DatabaseURL = u.String()
	return s
}
