package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/execlock"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/metrics"
)

// The lock node gauges follow a dispatcher's only node: 1 of 1 up; 0 when it is killed, with the
// keyed kind waiting for a quorum; 1 again when it is back, the kind no longer waiting; and a stopped
// dispatcher's nodes no longer count.
func TestLockNodeGauges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	kind := jobinfo.MustDefine[account]("metrics_locks")
	createKind(t, b.db, kind)
	node := testenv.StartRedisNodes(t, 1)[0]
	clients, err := execlock.NewClients(node.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = clients[0].Close() })
	cfg := b.config(t)
	cfg.Redis = clients
	d, err := dispatcher.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := dispatcher.Register(d, kind, func(context.Context, *dispatcher.Job[account]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop(t, d)
		}
	})
	gauges := func() string {
		e := scrape(t, b.url)
		up, _ := e.value(metrics.LockNodesUp)
		all, _ := e.value(metrics.LockNodes)
		waiting, ok := e.value(metrics.LockQuorumWaiting, metrics.LabelKind, "metrics_locks")
		return fmt.Sprintf("up=%v nodes=%v waiting=%v (%v)", up, all, waiting, ok)
	}
	waitGauges := func(what, want string) {
		t.Helper()
		var got string
		waitFor(t, what, 30*time.Second, func() bool { got = gauges(); return got == want })
	}
	waitGauges("the node up", "up=1 nodes=1 waiting=0 (true)")
	node.Kill()
	mustEnqueue(t, b.db, kind, account{Account: "a"})
	waitGauges("the node down and the kind waiting", "up=0 nodes=1 waiting=1 (true)")
	node.Restart(t)
	waitGauges("the node back", "up=1 nodes=1 waiting=0 (true)")
	waitFor(t, "the job processed", 30*time.Second, func() bool {
		return countWhere(t, b.db, "metrics_locks", "processed_at IS NOT NULL") == 1
	})
	stopped = true
	stop(t, d)
	if got, want := gauges(), "up=0 nodes=0 waiting=0 (true)"; got != want {
		t.Errorf("after Stop: %s, want %s", got, want)
	}
}

// With several dispatchers, the lock node gauges are sums over those still running.
func TestLockNodesSummed(t *testing.T) {
	t.Parallel()
	reg, o := newObserver(t)
	read := func() string {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				if m.Gauge != nil && len(m.GetLabel()) == 0 {
					got[f.GetName()] = m.GetGauge().GetValue()
				}
			}
		}
		return fmt.Sprint(got)
	}
	o.LockNodes("a", 3, 3)
	o.LockNodes("b", 1, 3)
	if got, want := read(), "map[jobpipe_lock_nodes:6 jobpipe_lock_nodes_up:4]"; got != want {
		t.Errorf("two dispatchers: %s, want %s", got, want)
	}
	o.LockNodes("a", 0, 0)
	if got, want := read(), "map[jobpipe_lock_nodes:3 jobpipe_lock_nodes_up:1]"; got != want {
		t.Errorf("after a stopped: %s, want %s", got, want)
	}
}
