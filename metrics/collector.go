package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
)

// DefaultTimeout bounds one scrape's reads, under Prometheus's default scrape timeout of 10 s.
const DefaultTimeout = 5 * time.Second

// Collector is a prometheus.Collector of each registered kind's load, read from PostgreSQL at every
// scrape (see the package documentation for the gauges). Register it once per registry.
//
// A failed read leaves out the gauges it would have given, counts one jobpipe_scrape_errors_total
// and is logged; every other metric is still served. A kind whose table is missing, for example,
// hides only that kind.
type Collector struct {
	db      jobinfo.DB
	timeout time.Duration
	logger  *slog.Logger

	// mu serialises scrapes: db may be a single connection, and concurrent scrapes would only
	// double the load.
	mu     sync.Mutex
	errors prometheus.Counter

	running, maxRunning, remaining, keysAtLimit *prometheus.Desc
}

// CollectorOption configures NewCollector.
type CollectorOption func(*Collector)

// WithTimeout bounds each scrape's reads (default DefaultTimeout). Kinds not read by then are left
// out of that scrape and counted as errors.
func WithTimeout(d time.Duration) CollectorOption { return func(c *Collector) { c.timeout = d } }

// WithLogger sets where scrape errors are logged (default slog.Default()).
func WithLogger(l *slog.Logger) CollectorOption { return func(c *Collector) { c.logger = l } }

// NewCollector returns a Collector that reads through db, usually the application's pool.
func NewCollector(db jobinfo.DB, opts ...CollectorOption) *Collector {
	kind := []string{LabelKind}
	c := &Collector{
		db: db, timeout: DefaultTimeout, logger: slog.Default(),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: ScrapeErrors,
			Help: "Failed reads of jobpipe's gauges from PostgreSQL (the gauges they would have given are left out of that scrape)."}),
		running: prometheus.NewDesc(RunningJobs, "Jobs of the kind running now, across all dispatchers.", kind, nil),
		maxRunning: prometheus.NewDesc(MaxRunningJobs,
			"The kind's total limit of running jobs in force: +Inf when it has none, 0 when paused.", kind, nil),
		remaining: prometheus.NewDesc(RemainingWorkCount,
			"Jobs of the kind not started or waiting to run again: due, scheduled and retrying.", kind, nil),
		keysAtLimit: prometheus.NewDesc(KeysAtLimit,
			fmt.Sprintf("Keys of the kind running as many jobs as their limit allows, or more (counted up to %d).", dispatcher.MaxKeysAtLimit), kind, nil),
	}
	for _, o := range opts {
		o(c)
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return c
}

// Describe sends the descriptors of every metric the Collector gives.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.running
	ch <- c.maxRunning
	ch <- c.remaining
	ch <- c.keysAtLimit
	c.errors.Describe(ch)
}

// Collect reads every registered kind's usage and sends its gauges, then the error counter.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	kinds, errs := c.kinds(ctx)
	for _, k := range kinds {
		u, err := dispatcher.ReadUsage(ctx, c.db, k.Info)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		name := k.Name()
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(u.Running), name)
		ch <- prometheus.MustNewConstMetric(c.maxRunning, prometheus.GaugeValue, maxRunningValue(u.MaxRunning), name)
		ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, float64(u.Remaining), name)
		ch <- prometheus.MustNewConstMetric(c.keysAtLimit, prometheus.GaugeValue, float64(len(u.KeysAtLimit)), name)
	}
	for _, err := range errs {
		c.errors.Inc()
		c.logger.Warn("metrics: reading jobpipe's gauges failed; they are left out of this scrape", "err", err)
	}
	c.errors.Collect(ch)
}

// maxRunningValue is the gauge of a total limit: +Inf for none, so that an alert on
// running >= max never fires for a kind without a limit.
func maxRunningValue(n int) float64 {
	if n == limits.Unlimited {
		return math.Inf(1)
	}
	return float64(n)
}

// kinds lists the registered kinds. A kind whose table is missing is left out (admin.Kinds returns
// the others), with one error for each such kind.
func (c *Collector) kinds(ctx context.Context) ([]*admin.Kind, []error) {
	kinds, err := admin.Kinds(ctx, c.db)
	switch {
	case err == nil:
		return kinds, nil
	case !errors.Is(err, admin.ErrTableMissing):
		return nil, []error{err}
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		return kinds, joined.Unwrap()
	}
	return kinds, []error{err}
}
