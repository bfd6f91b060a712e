package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
	"github.com/jobpipe/jobpipe/metrics"
)

// Report is the examples' kind.
type Report struct {
	Month string `jobpipe:"month"`
}

// Serve the gauges on /metrics of the application's own server: a registry of its own (or
// prometheus.DefaultRegisterer), the Collector on it, and Mount.
func ExampleMount() {
	ctx := context.Background()
	pool, cleanup := exampleDB(ctx)
	defer cleanup()
	reports := exampleKind(ctx, pool)
	for _, month := range []string{"2026-01", "2026-02", "2026-03"} {
		if _, err := dispatcher.Enqueue(ctx, pool, reports, Report{Month: month}); err != nil {
			log.Fatal(err)
		}
	}
	if err := limits.SetMaxRunning(ctx, pool, "report", 5); err != nil {
		log.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(pool))
	mux := http.NewServeMux()
	metrics.Mount(mux, reg) // GET /metrics
	srv := httptest.NewServer(mux)
	defer srv.Close()

	printMetrics(srv.URL+metrics.Path, "jobpipe_")
	// Output:
	// jobpipe_keys_at_limit{kind="report"} 0
	// jobpipe_max_running_jobs{kind="report"} 5
	// jobpipe_remaining_work_count{kind="report"} 3
	// jobpipe_running_jobs{kind="report"} 0
	// jobpipe_scrape_errors_total 0
}

// Count what a worker process's dispatchers do: an Observer on the registry, set as
// Config.Observer.
func ExampleNewObserver() {
	ctx := context.Background()
	pool, cleanup := exampleDB(ctx)
	defer cleanup()
	reports := exampleKind(ctx, pool)
	if _, err := dispatcher.Enqueue(ctx, pool, reports, Report{Month: "2026-01"}); err != nil {
		log.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	obs, err := metrics.NewObserver(reg)
	if err != nil {
		log.Fatal(err)
	}
	d, err := dispatcher.New(dispatcher.Config{DB: pool, Observer: obs})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	err = dispatcher.Register(d, reports, func(context.Context, *dispatcher.Job[Report]) error {
		close(done)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-done
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.Stop(stopCtx); err != nil { // every outcome is counted when Stop returns
		log.Fatal(err)
	}

	srv := httptest.NewServer(metrics.Handler(reg))
	defer srv.Close()
	printMetrics(srv.URL, `jobpipe_jobs_finished_total{kind="report",outcome="processed"}`)
	printMetrics(srv.URL, `jobpipe_schedule_lag_seconds_count`)
	// Output:
	// jobpipe_jobs_finished_total{kind="report",outcome="processed"} 1
	// jobpipe_schedule_lag_seconds_count{kind="report"} 1
}

// printMetrics prints the sample lines of url that start with prefix.
func printMetrics(url, prefix string) {
	resp, err := http.Get(url)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), prefix) {
			fmt.Println(lines.Text())
		}
	}
}

func exampleDB(ctx context.Context) (*pgxpool.Pool, func()) {
	pool, _, drop, err := testenv.ExampleSchema(ctx)
	if err != nil {
		log.Fatal(err)
	}
	return pool, drop
}

// exampleKind creates the report kind's table and records the kind.
func exampleKind(ctx context.Context, pool *pgxpool.Pool) *jobinfo.Kind[Report] {
	reports := jobinfo.MustDefine[Report]("report")
	ddl, _ := reports.TableSpec().CreateSQL()
	if _, err := pool.Exec(ctx, ddl); err != nil {
		log.Fatal(err)
	}
	if err := reports.Register(ctx, pool); err != nil {
		log.Fatal(err)
	}
	return reports
}
