package metrics

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobpipe/jobpipe/dispatcher"
)

// Default histogram buckets, in seconds. Jobs run from milliseconds to an hour; a job that starts
// more than a few seconds late shows a backlog.
var (
	DefaultDurationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	DefaultLagBuckets      = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600}
)

// Observer counts what dispatchers do, as Prometheus metrics (see the package documentation). It
// implements dispatcher.Observer: set it as dispatcher.Config.Observer of every dispatcher of the
// process. Series are made when a kind is registered, so a job's path only adds to them: no lookup
// and no allocation per job.
type Observer struct {
	finished *prometheus.CounterVec
	duration *prometheus.HistogramVec
	lag      *prometheus.HistogramVec
	locks    *prometheus.CounterVec
	rescued  *prometheus.CounterVec
	keyRuns  *prometheus.CounterVec
	// pausesMissed counts the claim passes that went on without their pause.
	pausesMissed *prometheus.CounterVec
	nodesUp      prometheus.Gauge
	nodes        prometheus.Gauge
	waiting      *prometheus.GaugeVec

	mu    sync.Mutex
	kinds map[string]*kindObserver
	// lockNodes holds each watching dispatcher's nodes, up and in all, by its name: the gauges are
	// their sums.
	lockNodes map[string][2]int
}

// ObserverOption configures NewObserver.
type ObserverOption func(*observerConfig)

type observerConfig struct{ duration, lag []float64 }

// WithDurationBuckets sets the buckets of jobpipe_job_duration_seconds (default
// DefaultDurationBuckets).
func WithDurationBuckets(b []float64) ObserverOption {
	return func(c *observerConfig) { c.duration = b }
}

// WithLagBuckets sets the buckets of jobpipe_schedule_lag_seconds (default DefaultLagBuckets).
func WithLagBuckets(b []float64) ObserverOption { return func(c *observerConfig) { c.lag = b } }

// NewObserver registers the dispatcher metrics on reg (prometheus.DefaultRegisterer when nil) and
// returns the Observer that feeds them. Called again with the same registry, it shares the metrics
// registered first (and their buckets), so several dispatchers of a process may each make one.
func NewObserver(reg prometheus.Registerer, opts ...ObserverOption) (*Observer, error) {
	cfg := observerConfig{duration: DefaultDurationBuckets, lag: DefaultLagBuckets}
	for _, o := range opts {
		o(&cfg)
	}
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	o := &Observer{kinds: map[string]*kindObserver{}, lockNodes: map[string][2]int{}}
	var errs []error
	o.finished = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{Name: JobsFinished,
		Help: "Finished job attempts, by outcome."}, []string{LabelKind, LabelOutcome}))
	o.duration = register(reg, &errs, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: JobDuration,
		Help: "How long handlers ran, by outcome (0 for jobs that never ran).", Buckets: cfg.duration},
		[]string{LabelKind, LabelOutcome}))
	o.lag = register(reg, &errs, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: ScheduleLag,
		Help:    "How late jobs started: the claim's time minus the time the job was due (process_after, else created_at).",
		Buckets: cfg.lag}, []string{LabelKind}))
	o.locks = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{Name: LockAcquire,
		Help: "Redis lock attempts (queue and execution locks), by result."}, []string{LabelKind, LabelResult}))
	o.rescued = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{Name: RescuedJobs,
		Help: "Jobs taken back by this process's rescuer after their lease expired."}, []string{LabelKind}))
	o.keyRuns = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{Name: KeyRuns,
		Help: "Key runs that ended, by why."}, []string{LabelKind, LabelEnded}))
	o.pausesMissed = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{Name: PausesMissed,
		Help: "Claim passes that went on without pausing the finish statements, which did not end in time."}, []string{LabelKind}))
	o.nodesUp = register(reg, &errs, prometheus.NewGauge(prometheus.GaugeOpts{Name: LockNodesUp,
		Help: "Redis lock nodes that answered the latest PING of this process's dispatchers (summed over those with a keyed kind)."}))
	o.nodes = register(reg, &errs, prometheus.NewGauge(prometheus.GaugeOpts{Name: LockNodes,
		Help: "Redis lock nodes of this process's dispatchers (summed over those with a keyed kind); a quorum is a majority of a dispatcher's."}))
	o.waiting = register(reg, &errs, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: LockQuorumWaiting,
		Help: "Dispatchers of this process in which the kind's keyed jobs wait for a quorum of Redis lock nodes."},
		[]string{LabelKind}))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return o, nil
}

// register registers c on reg, or returns the collector registered already under its name.
func register[C prometheus.Collector](reg prometheus.Registerer, errs *[]error, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing
		}
	}
	*errs = append(*errs, fmt.Errorf("metrics: registering the dispatcher metrics: %w", err))
	return c
}

// Kind returns the observer of one kind, making its series. Dispatchers call it once per kind, when
// the kind is registered.
func (o *Observer) Kind(name string) dispatcher.KindObserver {
	o.mu.Lock()
	defer o.mu.Unlock()
	if k := o.kinds[name]; k != nil {
		return k
	}
	outcomes, results := dispatcher.Outcomes(), dispatcher.LockResults()
	k := &kindObserver{o: o, name: name, lag: o.lag.WithLabelValues(name), rescued: o.rescued.WithLabelValues(name),
		waiting:  o.waiting.WithLabelValues(name),
		finished: make([]prometheus.Counter, len(outcomes)), duration: make([]lazyHistogram, len(outcomes)),
		locks: make([]prometheus.Counter, len(results))}
	for _, out := range outcomes {
		k.finished[out] = o.finished.WithLabelValues(name, out.String())
	}
	for _, r := range results {
		k.locks[r] = o.locks.WithLabelValues(name, r.String())
	}
	o.kinds[name] = k
	return k
}

// kindObserver holds one kind's series. The counters of every outcome and lock result exist from
// the start, so that rate() sees a kind's first failure; a duration histogram is made at its
// outcome's first job, since most kinds never see most outcomes and each histogram is many series.
type kindObserver struct {
	o        *Observer
	name     string
	finished []prometheus.Counter // by dispatcher.Outcome
	duration []lazyHistogram      // by dispatcher.Outcome
	lag      prometheus.Observer
	locks    []prometheus.Counter // by dispatcher.LockResult
	rescued  prometheus.Counter
	waiting  prometheus.Gauge
	// runs holds the kind's key-run counters by dispatcher.RunEnd, and pausesMissed its counter of
	// claim passes without their pause, made at its first run's end or missed pause: a kind without
	// a key has neither.
	runsOnce     sync.Once
	runs         []prometheus.Counter
	pausesMissed prometheus.Counter
}

type lazyHistogram struct {
	once sync.Once
	h    prometheus.Observer
}

// JobStarted observes a job's schedule lag.
func (k *kindObserver) JobStarted(lag time.Duration) { k.lag.Observe(lag.Seconds()) }

// JobFinished counts an attempt's outcome and observes its run time.
func (k *kindObserver) JobFinished(out dispatcher.Outcome, ran time.Duration) {
	if int(out) >= len(k.finished) {
		return
	}
	k.finished[out].Inc()
	h := &k.duration[out]
	h.once.Do(func() { h.h = k.o.duration.WithLabelValues(k.name, out.String()) })
	h.h.Observe(ran.Seconds())
}

// LockAttempts counts n lock attempts that ended with r.
func (k *kindObserver) LockAttempts(r dispatcher.LockResult, n int) {
	if int(r) < len(k.locks) && n > 0 {
		k.locks[r].Add(float64(n))
	}
}

// LockNodes records the dispatcher's lock nodes, up and in all, or forgets them when total is 0 (it
// stopped), and sets the gauges to the sums over the dispatchers it knows.
func (o *Observer) LockNodes(dispatcher string, up, total int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if total == 0 {
		delete(o.lockNodes, dispatcher)
	} else {
		o.lockNodes[dispatcher] = [2]int{up, total}
	}
	var sumUp, sumTotal int
	for _, n := range o.lockNodes {
		sumUp, sumTotal = sumUp+n[0], sumTotal+n[1]
	}
	o.nodesUp.Set(float64(sumUp))
	o.nodes.Set(float64(sumTotal))
}

// LockWait counts the dispatchers in which the kind waits for a quorum of lock nodes: one more when
// one begins to, one fewer when it no longer does.
func (k *kindObserver) LockWait(waiting bool) {
	if waiting {
		k.waiting.Inc()
	} else {
		k.waiting.Dec()
	}
}

// KeyRunEnded counts a key run that ended, by why; it implements dispatcher.KeyRunObserver.
func (k *kindObserver) KeyRunEnded(why dispatcher.RunEnd, _ int) {
	k.keyedSeries()
	if int(why) < len(k.runs) {
		k.runs[why].Inc()
	}
}

// PauseMissed counts a claim pass that went on without its pause; it implements
// dispatcher.PauseObserver.
func (k *kindObserver) PauseMissed() {
	k.keyedSeries()
	k.pausesMissed.Inc()
}

// keyedSeries makes the series only a keyed kind has, once.
func (k *kindObserver) keyedSeries() {
	k.runsOnce.Do(func() {
		for _, end := range dispatcher.RunEnds() {
			k.runs = append(k.runs, k.o.keyRuns.WithLabelValues(k.name, end.String()))
		}
		k.pausesMissed = k.o.pausesMissed.WithLabelValues(k.name)
	})
}

// Rescued counts jobs the kind's rescuer took back.
func (k *kindObserver) Rescued(n int) {
	if n > 0 {
		k.rescued.Add(float64(n))
	}
}
