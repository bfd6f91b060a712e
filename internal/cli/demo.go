package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
	"github.com/jobpipe/jobpipe/uniqueness"
)

const demoUsage = `usage: jobpipe demo [--database-url URL] [--schema NAME] [--jobs N] [--customers N]

Runs the demo pipeline in its own schema (dropped and created afresh each run): applies jobpipe's
migrations, creates the webhook_delivery kind (unique per event, keyed per customer), enqueues N
deliveries in bulk with duplicates and scheduled ones among them, shows the three duplicate strategies,
and prints what landed in the table, checked against what was sent.

flags:
  --database-url URL  the database (default $DATABASE_URL, else ` + defaultDatabaseURL + `)
  --schema NAME       the schema the demo owns (default jobpipe_demo)
  --jobs N            deliveries to enqueue (default 5000)
  --customers N       customers they belong to (default 25)
`

func init() {
	register(&command{name: "demo", summary: "run the demo pipeline and print its checked summary", usage: demoUsage, run: runDemo})
}

// delivery is the demo kind: a webhook delivery, unique per event, keyed per customer.
type delivery struct {
	CustomerID int64  `jobpipe:"customer_id,key"`
	EventID    string `jobpipe:"event_id,unique"`
	URL        string `jobpipe:"url"`
	Body       string `jobpipe:"body"`
}

type demoConfig struct {
	schema         string
	jobs, customer int
}

func runDemo(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	dbURL := databaseURLFlag(fs)
	var cfg demoConfig
	fs.StringVar(&cfg.schema, "schema", "jobpipe_demo", "the schema the demo owns")
	fs.IntVar(&cfg.jobs, "jobs", 5000, "deliveries to enqueue")
	fs.IntVar(&cfg.customer, "customers", 25, "customers")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q; demo takes only flags", pos[0])
	}
	if err := jobinfo.ValidateName("schema", cfg.schema); err != nil {
		return &usageError{err: err}
	}
	if cfg.jobs < 10 || cfg.customer < 1 || cfg.customer > cfg.jobs {
		return usagef("--jobs must be at least 10 and --customers between 1 and --jobs")
	}
	db, err := e.demoSchema(ctx, *dbURL, cfg.schema)
	if err != nil {
		return err
	}
	defer db.Close()
	return demo(ctx, e.Stdout, db, cfg)
}

// demoSchema drops and creates the demo's schema and returns a pool whose search_path is that schema.
func (e *env) demoSchema(ctx context.Context, flagValue, schema string) (*pgxpool.Pool, error) {
	admin, err := e.connect(ctx, flagValue)
	if err != nil {
		return nil, err
	}
	cfg := admin.Config()
	s := pgx.Identifier{schema}.Sanitize()
	_, err = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+s+" CASCADE; CREATE SCHEMA "+s)
	admin.Close()
	if err != nil {
		return nil, fmt.Errorf("demo: creating schema %s: %w", schema, err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	return pgxpool.NewWithConfig(ctx, cfg)
}

func demo(ctx context.Context, out io.Writer, db *pgxpool.Pool, cfg demoConfig) error {
	start := time.Now()
	if err := migrations.Up(ctx, db); err != nil {
		return err
	}
	kind, err := jobinfo.Define[delivery]("webhook_delivery", jobinfo.MaxAttempts(5))
	if err != nil {
		return err
	}
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("demo: creating the kind's table: %w", err)
	}
	if err := kind.Register(ctx, db); err != nil {
		return err
	}
	fmt.Fprintf(out, "schema %s: jobpipe's tables migrated, kind webhook_delivery created and checked\n", cfg.schema)

	// Every tenth delivery repeats the event of the one before it: a webhook re-sent by its source.
	jobs := make([]delivery, cfg.jobs)
	for i := range jobs {
		event := i
		if i%10 == 9 {
			event = i - 1
		}
		c := int64(event % cfg.customer)
		jobs[i] = delivery{CustomerID: c, EventID: fmt.Sprintf("evt-%06d", event),
			URL: fmt.Sprintf("https://customer-%d.example/hooks", c), Body: fmt.Sprintf(`{"event":%d}`, event)}
	}
	scheduled := cfg.jobs / 10
	now, later := jobs[:cfg.jobs-scheduled], jobs[cfg.jobs-scheduled:]
	t0 := time.Now()
	resNow, err := dispatcher.EnqueueMany(ctx, db, kind, now)
	if err != nil {
		return err
	}
	resLater, err := dispatcher.EnqueueMany(ctx, db, kind, later, dispatcher.ProcessIn(time.Hour))
	if err != nil {
		return err
	}
	elapsed := time.Since(t0)
	results := append(resNow, resLater...)
	dups, laterDups := countDuplicates(results), countDuplicates(resLater)
	fmt.Fprintf(out, "enqueued %d deliveries in bulk in %v (%.0f/s): %d new, %d duplicates skipped, %d new ones scheduled in 1h\n",
		len(results), elapsed.Round(time.Millisecond), float64(len(results))/elapsed.Seconds(), len(results)-dups, dups, len(later)-laterDups)

	strategies, err := demoStrategies(ctx, out, db, kind)
	if err != nil {
		return err
	}
	if err := demoReport(ctx, out, db); err != nil {
		return err
	}
	if err := demoVerify(ctx, db, len(results)-dups+strategies.newRows, len(later)-laterDups); err != nil {
		return err
	}
	fmt.Fprintf(out, "verified: one waiting row per event, every duplicate resolved to it, scheduled rows not due (%v)\n",
		time.Since(start).Round(time.Millisecond))
	return nil
}

type strategyOutcome struct{ newRows int }

// demoStrategies enqueues one event three more times, once per duplicate strategy, and shows what each did.
func demoStrategies(ctx context.Context, out io.Writer, db *pgxpool.Pool, kind *jobinfo.Kind[delivery]) (strategyOutcome, error) {
	job := delivery{CustomerID: 0, EventID: "evt-debounce", URL: "https://customer-0.example/hooks", Body: `{"v":1}`}
	first, err := dispatcher.Enqueue(ctx, db, kind, job, dispatcher.ProcessIn(5*time.Second))
	if err != nil {
		return strategyOutcome{}, err
	}
	job.Body = `{"v":2}`
	replaced, err := dispatcher.Enqueue(ctx, db, kind, job, dispatcher.ProcessIn(10*time.Second),
		dispatcher.OnDuplicate(uniqueness.Replace))
	if err != nil {
		return strategyOutcome{}, err
	}
	_, dupErr := dispatcher.Enqueue(ctx, db, kind, job, dispatcher.OnDuplicate(uniqueness.Error))
	var dup *uniqueness.DuplicateError
	if !errors.As(dupErr, &dup) || replaced.ID != first.ID || !replaced.Duplicate {
		return strategyOutcome{}, fmt.Errorf("demo: duplicate strategies misbehaved: replace=%+v error=%v", replaced, dupErr)
	}
	var body string
	var wait time.Duration
	err = db.QueryRow(ctx, `SELECT body, process_after - created_at FROM webhook_delivery WHERE id = $1`, first.ID).Scan(&body, &wait)
	if err != nil {
		return strategyOutcome{}, err
	}
	fmt.Fprintf(out, "debounce: job %d replaced in place (body now %s, due %v after enqueue); the error strategy said: %v\n",
		first.ID, body, wait.Round(time.Second), dupErr)
	return strategyOutcome{newRows: 1}, nil
}

func demoReport(ctx context.Context, out io.Writer, db *pgxpool.Pool) error {
	rows, err := db.Query(ctx, `
		SELECT customer_id, count(*), count(*) FILTER (WHERE process_after > now()), min(event_id), max(event_id)
		FROM webhook_delivery GROUP BY customer_id ORDER BY customer_id LIMIT 5`)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "customer\twaiting\tscheduled\tfirst event\tlast event\t")
	for rows.Next() {
		var c, n, sched int64
		var first, last string
		if err := rows.Scan(&c, &n, &sched, &first, &last); err != nil {
			return err
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t\n", c, n, sched, first, last)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	fmt.Fprintln(out, "the first customers' deliveries in the table:")
	return tw.Flush()
}

// demoVerify checks the table against what was sent.
func demoVerify(ctx context.Context, db *pgxpool.Pool, wantRows, wantScheduled int) error {
	var total, distinct, scheduled int
	err := db.QueryRow(ctx, `SELECT count(*), count(DISTINCT event_id), count(*) FILTER (WHERE process_after > now() + interval '59 minutes')
		FROM webhook_delivery`).Scan(&total, &distinct, &scheduled)
	if err != nil {
		return err
	}
	if total != wantRows || distinct != total || scheduled != wantScheduled {
		return fmt.Errorf("demo: verification failed: %d rows (want %d), %d distinct events, %d scheduled (want %d)",
			total, wantRows, distinct, scheduled, wantScheduled)
	}
	return nil
}

func countDuplicates(results []uniqueness.Result) int {
	n := 0
	for _, r := range results {
		if r.Duplicate {
			n++
		}
	}
	return n
}
