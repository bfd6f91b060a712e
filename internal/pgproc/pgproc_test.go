package pgproc

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestClusterLifecycle starts a cluster, and checks that a committed row survives a fast restart, an
// immediate one and a kill of every process, that sessions see each stop as the server's, and that
// Close leaves no process and no directory behind.
func TestClusterLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Settings: map[string]string{"max_connections": "20"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Port == 0 || c.Pid() == 0 || !strings.Contains(c.URL, "127.0.0.1:") {
		t.Fatalf("started cluster: port %d, pid %d, URL %q", c.Port, c.Pid(), c.URL)
	}
	conn := connect(ctx, t, c)
	var fsync, maxConns string
	if err := conn.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('max_connections')`).Scan(&fsync, &maxConns); err != nil {
		t.Fatal(err)
	}
	if fsync != "off" || maxConns != "20" {
		t.Errorf("fsync = %s, max_connections = %s; want off and 20 (Options.Settings)", fsync, maxConns)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE kept (n int)`); err != nil {
		t.Fatal(err)
	}

	pids := []int{c.Pid()}
	for i, mode := range []Mode{Fast, Immediate} {
		if _, err := conn.Exec(ctx, `INSERT INTO kept VALUES ($1)`, i); err != nil {
			t.Fatal(err)
		}
		if err := c.Restart(ctx, mode); err != nil {
			t.Fatalf("restart %s: %v", mode, err)
		}
		if _, err := conn.Exec(ctx, `SELECT 1`); err == nil {
			t.Errorf("after a %s restart the old session still works", mode)
		}
		conn = connect(ctx, t, c)
		pids = append(pids, c.Pid())
	}
	if _, err := conn.Exec(ctx, `INSERT INTO kept VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	port := c.Port
	c.Kill()
	c.Kill() // killing a killed server does nothing
	if c.Pid() != 0 {
		t.Errorf("Pid after Kill = %d, want 0", c.Pid())
	}
	if _, err := pgx.Connect(ctx, c.URL); err == nil {
		t.Error("a killed server accepts connections")
	}
	if err := c.Restart(ctx, Fast); err != nil { // starts the killed server: crash recovery
		t.Fatal(err)
	}
	if c.Port != port {
		t.Errorf("port after restart %d, want %d", c.Port, port)
	}
	conn = connect(ctx, t, c)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM kept`).Scan(&n); err != nil || n != 3 {
		t.Errorf("rows kept across restarts and a kill: %d (%v), want 3", n, err)
	}
	pids = append(pids, c.Pid())

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("postmaster %d still runs after Close", pid)
		}
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Close: %v", c.Dir, err)
	}
}

// TestKillStopsBusyBackends kills a server while a backend runs a long query. Every backend leads a
// process group of its own, and a busy one sees its postmaster gone only when it next waits: Kill must
// kill it too, or it runs on, attached to the shared memory, and the next start refuses to run.
func TestKillStopsBusyBackends(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	busy := connect(ctx, t, c)
	var pid int
	if err := busy.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = busy.Exec(ctx, `SELECT count(*) FROM generate_series(1, 1000000000)`) }()
	watch := connect(ctx, t, c)
	for {
		var active bool
		if err := watch.QueryRow(ctx, `SELECT state = 'active' FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&active); err != nil {
			t.Fatal(err)
		}
		if active {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Kill()
	if state, alive := procState(pid); alive {
		t.Errorf("backend %d (busy with a query) is still running after Kill (state %s)", pid, state)
	}
	if err := c.Restart(ctx, Fast); err != nil {
		t.Fatalf("start after Kill: %v", err)
	}
}

// TestBinDirSaysWhatIsMissing checks the error when $JOBPIPE_PG_BIN names a directory without the
// server's programs.
func TestBinDirSaysWhatIsMissing(t *testing.T) {
	t.Setenv(BinDirEnv, t.TempDir())
	_, err := BinDir()
	if err == nil || !strings.Contains(err.Error(), "initdb") || !strings.Contains(err.Error(), BinDirEnv) {
		t.Errorf("BinDir with an empty $%s: %v", BinDirEnv, err)
	}
}

// connect opens a session on c, closed when t ends.
func connect(ctx context.Context, t *testing.T, c *Cluster) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}
