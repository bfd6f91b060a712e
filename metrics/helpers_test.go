package metrics_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/metrics"
	"github.com/jobpipe/jobpipe/migrations"
)

// task is a kind without a key.
type task struct {
	N int64 `jobpipe:"n"`
}

// account is a kind whose jobs of one account run one at a time.
type account struct {
	Account string `jobpipe:"account,key"`
	Mode    string `jobpipe:"mode"`
}

// bundle is what a metrics test works with: its own schema and Redis prefix, a registry with the
// Collector and an Observer, and a server that serves the registry on /metrics.
type bundle struct {
	db    *pgxpool.Pool
	redis *testenv.Redis
	reg   *prometheus.Registry
	obs   *metrics.Observer
	url   string
}

func setup(t *testing.T, opts ...metrics.CollectorOption) *bundle {
	t.Helper()
	s := testenv.NewSchema(t)
	if err := migrations.Up(context.Background(), s.Pool); err != nil {
		t.Fatal(err)
	}
	b := &bundle{db: s.Pool, redis: testenv.NewRedis(t), reg: prometheus.NewRegistry()}
	b.reg.MustRegister(metrics.NewCollector(s.Pool, opts...))
	obs, err := metrics.NewObserver(b.reg)
	if err != nil {
		t.Fatal(err)
	}
	b.obs = obs
	mux := http.NewServeMux()
	metrics.Mount(mux, b.reg)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	b.url = srv.URL + metrics.Path
	return b
}

// newObserver returns an Observer on a registry of its own, for tests that need no database.
func newObserver(t *testing.T) (*prometheus.Registry, *metrics.Observer) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o, err := metrics.NewObserver(reg)
	if err != nil {
		t.Fatal(err)
	}
	return reg, o
}

// config is a dispatcher configuration for the test's schema and Redis prefix, with the Observer.
func (b *bundle) config(t *testing.T) dispatcher.Config {
	return dispatcher.Config{DB: b.db, Redis: b.redis.Clients, RedisPrefix: b.redis.Prefix, NodeName: t.Name(),
		LeaseTTL: 3 * time.Second, PollInterval: 200 * time.Millisecond, LeaderTTL: 3 * time.Second, Observer: b.obs}
}

// start starts a dispatcher with the kinds reg registers, and stops it when the test ends.
func (b *bundle) start(t *testing.T, cfg dispatcher.Config, reg func(d *dispatcher.Dispatcher) error) *dispatcher.Dispatcher {
	t.Helper()
	d, err := dispatcher.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg(d); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { stop(t, d) }) })
	return d
}

func stop(t *testing.T, d *dispatcher.Dispatcher) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// createKind creates the kind's table and records the kind in the registry.
func createKind[T any](t *testing.T, db *pgxpool.Pool, kind *jobinfo.Kind[T]) {
	t.Helper()
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := db.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	if err := kind.Info().Register(ctx, db); err != nil {
		t.Fatal(err)
	}
}

// exposition is one scrape of /metrics, parsed.
type exposition struct {
	text     string
	families map[string]*dto.MetricFamily
}

// scrape fetches url in the text format and parses it.
func scrape(t *testing.T, url string) exposition {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the exposition: %v\n%s", err, body)
	}
	return exposition{text: string(body), families: fams}
}

// metric returns the series of family name whose labels are exactly labels (name, value pairs).
func (e exposition) metric(name string, labels ...string) *dto.Metric {
	f := e.families[name]
	if f == nil {
		return nil
	}
	for _, m := range f.GetMetric() {
		if len(m.GetLabel())*2 != len(labels) {
			continue
		}
		match := true
		for i, l := range m.GetLabel() {
			// The parser sorts labels by name, as the tests list them.
			if l.GetName() != labels[2*i] || l.GetValue() != labels[2*i+1] {
				match = false
			}
		}
		if match {
			return m
		}
	}
	return nil
}

// value returns a gauge's or counter's value; ok is false when the series is absent.
func (e exposition) value(name string, labels ...string) (v float64, ok bool) {
	m := e.metric(name, labels...)
	switch {
	case m == nil:
		return 0, false
	case m.Gauge != nil:
		return m.GetGauge().GetValue(), true
	case m.Counter != nil:
		return m.GetCounter().GetValue(), true
	case m.Untyped != nil:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countWhere counts the rows of table matching cond.
func countWhere(t *testing.T, db *pgxpool.Pool, table, cond string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE "+cond).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
