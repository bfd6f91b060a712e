package dispatcher_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/execlock"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// refusedAddr returns a 127.0.0.1 address where nothing listens.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// lockClients returns execlock clients of addrs, closed when the test ends.
func lockClients(t *testing.T, addrs ...string) []*redis.Client {
	t.Helper()
	clients, err := execlock.NewClients(addrs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range clients {
			_ = c.Close()
		}
	})
	return clients
}

func noopPostSync(context.Context, *dispatcher.Job[postSync]) error { return nil }

// Start fails when fewer than a quorum of lock nodes answer, naming each node that did not, and
// starts nothing: it may be called again. A minority of nodes down does not stop it, and neither do
// nodes down when no kind has a key.
func TestStartChecksLockQuorum(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("quorum_sync")
	createKind(t, b.db, kind)
	plain := jobinfo.MustDefine[plainJob]("quorum_plain")
	createKind(t, b.db, plain)
	up := testenv.StartRedisNodes(t, 2)
	down1, down2 := refusedAddr(t), refusedAddr(t)
	refused := func(addr string) string {
		return fmt.Sprintf("node %s: dial tcp %s: connect: connection refused", addr, addr)
	}
	const advice = "check the addresses in Config.Redis and that those Redis servers run, " +
		"or set Config.StartWithoutLockQuorum to start anyway (keyed jobs then wait until a quorum answers)"
	for _, tc := range []struct {
		name    string
		nodes   []string
		keyed   bool
		wantErr string
	}{
		{name: "the only node refuses", nodes: []string{down1}, keyed: true,
			wantErr: "dispatcher: Start: 0 of 1 Redis lock nodes answered PING, and the keyed kinds (quorum_sync) need a quorum of 1 to take their locks:\n" +
				refused(down1) + "\n" + advice},
		{name: "two of three refuse", nodes: []string{down1, up[0].Addr, down2}, keyed: true,
			wantErr: "dispatcher: Start: 1 of 3 Redis lock nodes answered PING, and the keyed kinds (quorum_sync) need a quorum of 2 to take their locks:\n" +
				refused(down1) + "\n" + refused(down2) + "\n" + advice},
		{name: "one of three refuses", nodes: []string{up[0].Addr, down1, up[1].Addr}, keyed: true},
		{name: "no keyed kind", nodes: []string{down1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := b.cfg
			cfg.Redis = lockClients(t, tc.nodes...)
			d, err := dispatcher.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if tc.keyed {
				err = dispatcher.Register(d, kind, noopPostSync)
			} else {
				err = dispatcher.Register(d, plain, func(context.Context, *dispatcher.Job[plainJob]) error { return nil })
			}
			if err != nil {
				t.Fatal(err)
			}
			err = d.Start(context.Background())
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Start: %v", err)
				}
				stopNow(t, d)
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("Start = %v\nwant %s", err, tc.wantErr)
			}
			// Nothing started (the package's leak check would see a goroutine), and Start may be tried again.
			if err := d.Stop(context.Background()); err == nil || err.Error() != "dispatcher: Stop: the dispatcher is not running" {
				t.Errorf("Stop after a failed Start = %v", err)
			}
			if err := d.Start(context.Background()); err == nil || err.Error() != tc.wantErr {
				t.Errorf("second Start = %v", err)
			}
		})
	}
}

// lockWaitRows returns the test's rows of jobpipe_lock_waits as "kind node_name error".
func lockWaitRows(t *testing.T, b *runBundle) []string {
	t.Helper()
	rows, err := b.db.Query(context.Background(), `SELECT kind || ' ' || node_name || ' ' || error FROM jobpipe_lock_waits ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Killing the only lock node while keyed jobs wait gives one WARN that names the node, its error and
// the jobs due, a row in jobpipe_lock_waits and the observer's calls; bringing it back gives one INFO,
// the jobs run, and the row and the wait are gone.
func TestLockNodeDownReportedOnce(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("outage_sync")
	createKind(t, b.db, kind)
	node := testenv.StartRedisNodes(t, 1)[0]
	logs := &logRecorder{}
	rec := newRecorder()
	cfg := b.cfg
	cfg.Redis = lockClients(t, node.Addr)
	cfg.Logger = slog.New(logs)
	cfg.Observer = rec
	cfg.PollInterval = 200 * time.Millisecond
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error { return dispatcher.Register(d, kind, noopPostSync) })
	ctx := context.Background()
	enqueue := func(from, to int64) {
		for blog := from; blog < to; blog++ {
			if _, err := dispatcher.Enqueue(ctx, b.db, kind, postSync{BlogID: blog}); err != nil {
				t.Fatal(err)
			}
		}
	}
	processed := func(n int) func() (bool, error) {
		return func() (bool, error) { return countWhere(t, b.db, "outage_sync", "processed_at IS NOT NULL") == n, nil }
	}
	enqueue(0, 1)
	waitFor(t, "the first job processed", 15*time.Second, processed(1))

	node.Kill()
	enqueue(1, 4)
	const warnMsg = "dispatcher: a kind's Redis lock calls fail: its keyed jobs wait until a quorum of lock nodes answers"
	waitFor(t, "the WARN", 30*time.Second, func() (bool, error) { return len(logs.find(slog.LevelWarn, warnMsg)) > 0, nil })
	refused := fmt.Sprintf("node %s: dial tcp %s: connect: connection refused", node.Addr, node.Addr)
	warn := logs.find(slog.LevelWarn, warnMsg)[0]
	if warn["kind"] != "outage_sync" || warn["jobs_due"] != "3" || warn["nodes_up"] != "0" || warn["nodes"] != "1" ||
		warn["quorum"] != "1" || warn["down"] != refused || !strings.HasPrefix(warn["err"], "execlock: lock nodes unavailable: ") {
		t.Errorf("WARN %v\nwant kind outage_sync, 3 jobs due, 0 of 1 nodes up (quorum 1), down %q and the lock call's error", warn, refused)
	}
	if got, want := lockWaitRows(t, b), []string{"outage_sync " + cfg.NodeName + " " + refused}; !slices.Equal(got, want) {
		t.Errorf("jobpipe_lock_waits = %q, want %q", got, want)
	}
	// The outage goes on for several more claim passes, each failing: no second WARN.
	failed := d.Stats().Locks.Unavailable
	waitFor(t, "more failed lock calls", 15*time.Second, func() (bool, error) { return d.Stats().Locks.Unavailable >= failed+10, nil })

	node.Restart(t)
	const infoMsg = "dispatcher: a kind's keyed jobs no longer wait for Redis lock nodes"
	waitFor(t, "the waiting jobs processed", 30*time.Second, processed(4))
	waitFor(t, "the INFO", 15*time.Second, func() (bool, error) { return len(logs.find(slog.LevelInfo, infoMsg)) > 0, nil })
	waitFor(t, "the nodes up again", 15*time.Second, func() (bool, error) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.lockNodes[len(rec.lockNodes)-1] == cfg.NodeName+" 1/1", nil
	})
	if infos := logs.find(slog.LevelInfo, infoMsg); len(infos) != 1 || infos[0]["kind"] != "outage_sync" || infos[0]["how"] != "its lock calls succeed again" {
		t.Errorf("INFO records %v, want one for outage_sync: its lock calls succeed again", infos)
	}
	if warns := logs.find(slog.LevelWarn, ""); len(warns) != 1 {
		t.Errorf("%d WARN records, want only the one: %v", len(warns), warns)
	}
	if got := lockWaitRows(t, b); len(got) != 0 {
		t.Errorf("jobpipe_lock_waits = %q after the recovery, want no row", got)
	}
	rec.mu.Lock()
	nodes, waits := slices.Clone(rec.lockNodes), slices.Clone(rec.lockWaits["outage_sync"])
	rec.mu.Unlock()
	wantNodes := []string{cfg.NodeName + " 1/1", cfg.NodeName + " 0/1", cfg.NodeName + " 1/1"}
	if !slices.Equal(nodes, wantNodes) || !slices.Equal(waits, []bool{true, false}) {
		t.Errorf("observer: LockNodes %q and LockWait %v; want %q and [true false]", nodes, waits, wantNodes)
	}
	stopNow(t, d)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if last := rec.lockNodes[len(rec.lockNodes)-1]; last != cfg.NodeName+" 0/0" {
		t.Errorf("the last LockNodes call is %q, want %q at Stop", last, cfg.NodeName+" 0/0")
	}
}

// With StartWithoutLockQuorum, Start logs the nodes that do not answer and starts; a keyed kind
// whose jobs then wait is reported, and its row is removed at Stop.
func TestStartWithoutLockQuorum(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("patient_sync")
	createKind(t, b.db, kind)
	addr := refusedAddr(t)
	logs := &logRecorder{}
	rec := newRecorder()
	cfg := b.cfg
	cfg.Redis = lockClients(t, addr)
	cfg.Logger = slog.New(logs)
	cfg.Observer = rec
	cfg.StartWithoutLockQuorum = true
	cfg.PollInterval = 200 * time.Millisecond
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error { return dispatcher.Register(d, kind, noopPostSync) })
	refused := fmt.Sprintf("node %s: dial tcp %s: connect: connection refused", addr, addr)
	starting := logs.find(slog.LevelWarn, "dispatcher: started without a quorum of Redis lock nodes")
	wantProblem := "0 of 1 Redis lock nodes answered PING, and the keyed kinds (patient_sync) need a quorum of 1 to take their locks:\n" + refused
	if len(starting) != 1 || starting[0]["problem"] != wantProblem {
		t.Fatalf("WARN at Start %v, want one with problem %q", starting, wantProblem)
	}
	if _, err := dispatcher.Enqueue(context.Background(), b.db, kind, postSync{BlogID: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the kind's row", 30*time.Second, func() (bool, error) { return len(lockWaitRows(t, b)) == 1, nil })
	if got, want := lockWaitRows(t, b), []string{"patient_sync " + cfg.NodeName + " " + refused}; !slices.Equal(got, want) {
		t.Errorf("jobpipe_lock_waits = %q, want %q", got, want)
	}
	stopNow(t, d)
	if got := lockWaitRows(t, b); len(got) != 0 {
		t.Errorf("jobpipe_lock_waits = %q after Stop, want no row", got)
	}
	infos := logs.find(slog.LevelInfo, "dispatcher: a kind's keyed jobs no longer wait for Redis lock nodes")
	if len(infos) != 1 || infos[0]["how"] != "the dispatcher stops" {
		t.Errorf("INFO records %v, want one: the dispatcher stops", infos)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := []string{cfg.NodeName + " 0/1", cfg.NodeName + " 0/0"}; !slices.Equal(rec.lockNodes, want) {
		t.Errorf("LockNodes calls %q, want %q", rec.lockNodes, want)
	}
	if got := rec.lockWaits["patient_sync"]; !slices.Equal(got, []bool{true, false}) {
		t.Errorf("LockWait calls %v, want [true false]", got)
	}
}
