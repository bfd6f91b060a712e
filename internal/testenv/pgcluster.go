package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/internal/pgproc"
)

// StartPostgres starts a throw-away PostgreSQL cluster for t (package pgproc: its own postmaster on
// a free port, fsync off), with settings added to its configuration, and waits until it accepts
// connections. It is stopped, every process of it killed and its directory removed when t ends,
// whatever the outcome. It fails t, saying what to install, when the server's programs are missing.
// Tests that stop, restart or kill the server use it; nothing they do reaches the shared server.
func StartPostgres(t testing.TB, settings map[string]string) *pgproc.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgproc.Start(ctx, pgproc.Options{Settings: settings})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("testenv: closing the PostgreSQL cluster in %s: %v", c.Dir, err)
		}
	})
	return c
}

// NewSchemaOn is NewSchema on the server that connString connects to (a cluster of
// StartPostgres, say) rather than the test server: a fresh schema for t, dropped when t ends.
func NewSchemaOn(t testing.TB, connString string) *Schema {
	t.Helper()
	return newSchemaOn(t, connString)
}
