package integration_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
	"github.com/jobpipe/jobpipe/schedule"
)

type beat struct {
	Source string `jobpipe:"source"`
}

// cronNode is one dispatcher of the cron test, with its own pool as a node of its own would have.
type cronNode struct {
	name string
	d    *dispatcher.Dispatcher
	once sync.Once
}

func (n *cronNode) stop(t *testing.T) {
	n.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.d.Stop(ctx); err != nil {
			t.Errorf("Stop %s: %v", n.name, err)
		}
	})
}

func startCronNode(t *testing.T, s *testenv.Schema, name string, kind *jobinfo.Kind[beat], spec schedule.Spec) *cronNode {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, s.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	d, err := dispatcher.New(dispatcher.Config{DB: pool, NodeName: name, LeaseTTL: 3 * time.Second,
		PollInterval: 200 * time.Millisecond, RescueInterval: 200 * time.Millisecond, LeaderTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := dispatcher.Register(d, kind, func(context.Context, *dispatcher.Job[beat]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := dispatcher.AddSchedule(d, kind, spec, beat{Source: "cron"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	n := &cronNode{name: name, d: d}
	t.Cleanup(func() { n.stop(t) })
	return n
}

// A schedule firing every second, run by two dispatchers, through two forced changes of leader:
// first the lease is handed to the other node behind the leader's back (for up to a renewal interval
// both believe they lead), then the new leader is stopped. Over the whole window every second has
// exactly one firing and exactly one job, none is missing, and both nodes fired some.
func TestCronEverySecondAcrossLeaderChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.NewSchema(t)
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	kind := jobinfo.MustDefine[beat]("beat")
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	spec := schedule.Spec{Name: "heartbeat", Cron: "* * * * * *"}
	nodes := map[string]*cronNode{}
	for _, name := range []string{"node-a", "node-b"} {
		nodes[name] = startCronNode(t, s, name, kind, spec)
	}

	leader := func() string {
		var holder string
		if err := s.Pool.QueryRow(ctx, `SELECT holder FROM jobpipe_leaders WHERE name = 'schedule:heartbeat' AND expires_at > now()`).Scan(&holder); err != nil {
			return ""
		}
		return holder
	}
	firingsSoFar := func() int {
		var n int
		if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM jobpipe_schedule_firings`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	other := func(name string) string {
		if name == "node-a" {
			return "node-b"
		}
		return "node-a"
	}

	waitUntil("a leader and 3 firings", func() bool { return leader() != "" && firingsSoFar() >= 3 })
	first := leader()
	// Change 1: the lease moves to the other node while the first still runs and, until its next
	// renewal, still believes it leads.
	if _, err := s.Pool.Exec(ctx, `UPDATE jobpipe_leaders SET holder = $1, expires_at = now() + interval '1 second'
		WHERE name = 'schedule:heartbeat'`, other(first)); err != nil {
		t.Fatal(err)
	}
	mark := firingsSoFar()
	waitUntil("3 firings under the second leader", func() bool { return leader() == other(first) && firingsSoFar() >= mark+3 })
	// Change 2: the second leader stops (resigning its leases); the first takes over.
	nodes[other(first)].stop(t)
	mark = firingsSoFar()
	waitUntil("3 firings under the first leader again", func() bool { return leader() == first && firingsSoFar() >= mark+3 })
	nodes[first].stop(t)

	// Every instant from the first firing to the last: one firing, one job, for that instant.
	rows, err := s.Pool.Query(ctx, `SELECT f.instant, f.job_id, j.process_after, j.source
		FROM jobpipe_schedule_firings f LEFT JOIN beat j ON j.id = f.job_id ORDER BY f.instant`)
	if err != nil {
		t.Fatal(err)
	}
	type firing struct {
		instant      time.Time
		jobID        int64
		processAfter *time.Time
		source       *string
	}
	fs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (firing, error) {
		var f firing
		return f, r.Scan(&f.instant, &f.jobID, &f.processAfter, &f.source)
	})
	if err != nil {
		t.Fatal(err)
	}
	window := fs[len(fs)-1].instant.Sub(fs[0].instant)
	if window < 6*time.Second || len(fs) != int(window/time.Second)+1 {
		t.Fatalf("%d firings over %v from %s: want one per second over at least 6 s", len(fs), window, fs[0].instant)
	}
	for i, f := range fs {
		if want := fs[0].instant.Add(time.Duration(i) * time.Second); !f.instant.Equal(want) {
			t.Fatalf("firing %d is for %s, want %s: an instant is missing", i, f.instant, want)
		}
		if f.processAfter == nil || !f.processAfter.Equal(f.instant) || *f.source != "cron" {
			t.Errorf("the job %d of %s: process_after %v, source %v", f.jobID, f.instant, f.processAfter, f.source)
		}
	}
	var jobs, distinct int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT process_after) FROM beat`).Scan(&jobs, &distinct); err != nil {
		t.Fatal(err)
	}
	if jobs != len(fs) || distinct != len(fs) {
		t.Errorf("%d jobs for %d distinct instants, want %d of each: one job per instant", jobs, distinct, len(fs))
	}
	var fired int64
	for name, n := range nodes {
		st := n.d.Stats()
		if st.ScheduleFired == 0 {
			t.Errorf("%s fired nothing: the leader did not change", name)
		}
		t.Logf("%s fired %d instants", name, st.ScheduleFired)
		fired += st.ScheduleFired
	}
	t.Logf("%d instants from %s to %s, each once", len(fs), fs[0].instant.UTC().Format(time.TimeOnly), fs[len(fs)-1].instant.UTC().Format(time.TimeOnly))
	if fired != int64(len(fs)) {
		t.Errorf("the nodes fired %d instants in all, the table has %d", fired, len(fs))
	}
	if n := firingsSoFar(); n != len(fs) {
		t.Errorf("%d firings, %d joined", n, len(fs))
	}
}
