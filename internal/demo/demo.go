package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

// Config is what a demo run needs.
type Config struct {
	// DB is the demo's database, its search_path set to a schema the demo may fill.
	DB *pgxpool.Pool
	// Redis are the lock nodes.
	Redis []*redis.Client
	// RedisPrefix keeps the demo's locks apart from anything else on the nodes.
	RedisPrefix string
	// Jobs is about how many jobs to enqueue (at least 100).
	Jobs int
	// Out receives progress and the summary.
	Out io.Writer
	// Progress is how often a progress line is printed. Default 1 s.
	Progress time.Duration
	// Logger receives the dispatchers' logs; nil leaves their default (warnings and errors).
	Logger *slog.Logger
}

// Run runs the demo and returns its checked summary; an error means the pipeline did not do what it
// promises (the summary says what), or the demo could not run.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if cfg.Jobs < 100 {
		return nil, fmt.Errorf("demo: %d jobs is too few: give at least 100", cfg.Jobs)
	}
	if cfg.Progress == 0 {
		cfg.Progress = time.Second
	}
	start := time.Now()
	k := defineKinds()
	if err := setUp(ctx, cfg.DB, k); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Out, "migrated jobpipe's tables and created 5 kinds: %v\n", k.tables())
	plan, err := enqueue(ctx, cfg, k)
	if err != nil {
		return nil, err
	}
	plan.print(cfg.Out)
	w := newWatch()
	var ds []*dispatcher.Dispatcher
	for _, node := range []string{"demo-a", "demo-b"} {
		d, err := startDispatcher(ctx, cfg, k, w, node)
		if err != nil {
			stopAll(ds)
			return nil, err
		}
		ds = append(ds, d)
	}
	fmt.Fprintf(cfg.Out, "two dispatchers (demo-a, demo-b) are working the jobs:\n")
	waitErr := progress(ctx, cfg, k)
	stopAll(ds)
	if waitErr != nil {
		return nil, waitErr
	}
	s, err := summarise(ctx, cfg.DB, plan, w, ds)
	if err != nil {
		return nil, err
	}
	s.Elapsed = time.Since(start)
	s.print(cfg.Out)
	if !s.OK() {
		return s, errors.New("demo: the pipeline broke a promise: see the summary")
	}
	return s, nil
}

func setUp(ctx context.Context, db *pgxpool.Pool, k kinds) error {
	if err := migrations.Up(ctx, db); err != nil {
		return err
	}
	for _, spec := range k.specs() {
		ddl, err := spec.CreateSQL()
		if err != nil {
			return err
		}
		if _, err := db.Exec(ctx, ddl); err != nil {
			return fmt.Errorf("demo: creating %s: %w", spec.Kind, err)
		}
	}
	return nil
}

func startDispatcher(ctx context.Context, cfg Config, k kinds, w *watch, node string) (*dispatcher.Dispatcher, error) {
	d, err := dispatcher.New(dispatcher.Config{DB: cfg.DB, Redis: cfg.Redis, RedisPrefix: cfg.RedisPrefix, NodeName: node,
		Concurrency: 16, LeaseTTL: 10 * time.Second, PollInterval: time.Second, RescueInterval: time.Second, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	err = errors.Join(
		dispatcher.Register(d, k.deliveries, func(ctx context.Context, j *dispatcher.Job[Delivery]) error {
			defer w.enter("webhook_delivery", j.Key)()
			time.Sleep(time.Duration(5+rand.IntN(15)) * time.Millisecond) // the customer's endpoint
			w.done(j.Kind, j.ID)
			return nil
		}),
		dispatcher.Register(d, k.posts, func(ctx context.Context, j *dispatcher.Job[PostSync]) error {
			defer w.enter("blog_post_sync", j.Key)()
			w.started(j.Data.BlogID, j.Data.Seq)
			time.Sleep(time.Duration(rand.IntN(2)) * time.Millisecond)
			w.done(j.Kind, j.ID)
			return nil
		}),
		dispatcher.Register(d, k.reminders, func(ctx context.Context, j *dispatcher.Job[Reminder]) error {
			var now time.Time
			if err := cfg.DB.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&now); err != nil {
				return err
			}
			w.scheduled(*j.ProcessAfter, now)
			w.done(j.Kind, j.ID)
			return nil
		}),
		dispatcher.Register(d, k.imports, func(ctx context.Context, j *dispatcher.Job[Import]) error {
			if j.Attempt <= 2 {
				return fmt.Errorf("upstream %s timed out (attempt %d)", j.Data.Source, j.Attempt)
			}
			w.done(j.Kind, j.ID)
			return nil
		}),
		dispatcher.Register(d, k.reports, func(ctx context.Context, j *dispatcher.Job[Report]) error {
			return fmt.Errorf("report %s: template missing", j.Data.Name)
		}),
	)
	if err != nil {
		return nil, err
	}
	return d, d.Start(ctx)
}

func stopAll(ds []*dispatcher.Dispatcher) {
	for _, d := range ds {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = d.Stop(ctx)
		cancel()
	}
}

// counts is where the demo's jobs stand, over all kinds.
type counts struct {
	waiting, running, retrying, processed, failed int
}

func readCounts(ctx context.Context, db *pgxpool.Pool, k kinds) (counts, error) {
	var c counts
	for _, table := range k.tables() {
		var w, r, rt, p, f int
		err := db.QueryRow(ctx, fmt.Sprintf(`SELECT
			count(*) FILTER (WHERE %[1]s AND attempts_made = 0), count(*) FILTER (WHERE %[2]s),
			count(*) FILTER (WHERE %[1]s AND attempts_made > 0), count(*) FILTER (WHERE %[3]s), count(*) FILTER (WHERE %[4]s)
			FROM %[5]s`, jobinfo.StateCondition(jobinfo.StateWaiting), jobinfo.StateCondition(jobinfo.StateRunning),
			jobinfo.StateCondition(jobinfo.StateProcessed), jobinfo.StateCondition(jobinfo.StateFailed), table)).
			Scan(&w, &r, &rt, &p, &f)
		if err != nil {
			return c, err
		}
		c.waiting, c.running, c.retrying, c.processed, c.failed = c.waiting+w, c.running+r, c.retrying+rt, c.processed+p, c.failed+f
	}
	return c, nil
}

// progress prints where the jobs stand until none is waiting or running.
func progress(ctx context.Context, cfg Config, k kinds) error {
	t := time.NewTicker(cfg.Progress)
	defer t.Stop()
	start := time.Now()
	deadline := start.Add(2 * time.Minute)
	for {
		c, err := readCounts(ctx, cfg.DB, k)
		if err != nil {
			return err
		}
		total := c.waiting + c.running + c.retrying + c.processed + c.failed
		fmt.Fprintf(cfg.Out, "  %5.1fs  processed %5d/%d  running %3d  waiting %5d  retrying %3d  failed %d\n",
			time.Since(start).Seconds(), c.processed, total, c.running, c.waiting, c.retrying, c.failed)
		if c.waiting+c.running+c.retrying == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("demo: jobs were still unfinished after 2 minutes")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
