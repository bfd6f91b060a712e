package prune_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/prune"
)

// Email is a kind that keeps processed jobs an hour and failed ones a month.
type Email struct {
	To string `jobpipe:"to"`
}

// Delete a kind's finished jobs past their retention, as the dispatcher's pruner does, and report
// progress as `jobpipe prune` does.
func ExampleRun() {
	ctx := context.Background()
	pool, _, drop, err := testenv.ExampleSchema(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer drop()
	emails := jobinfo.MustDefine[Email]("email", jobinfo.Retention(time.Hour, 30*24*time.Hour))
	ddl, _ := emails.TableSpec().CreateSQL()
	if _, err := pool.Exec(ctx, ddl); err != nil {
		log.Fatal(err)
	}
	// Three emails sent two hours ago, one failed two hours ago, one waiting.
	if _, err := pool.Exec(ctx, `INSERT INTO email ("to", created_at, processed_at, failed_at) VALUES
		('a@example.com', now() - interval '3 hours', now() - interval '2 hours', NULL),
		('b@example.com', now() - interval '3 hours', now() - interval '2 hours', NULL),
		('c@example.com', now() - interval '3 hours', now() - interval '2 hours', NULL),
		('d@example.com', now() - interval '3 hours', NULL, now() - interval '2 hours'),
		('e@example.com', now(), NULL, NULL)`); err != nil {
		log.Fatal(err)
	}
	opts := prune.Retention(emails.Info())
	opts.BatchSize = 2
	opts.Progress = func(p prune.Progress) {
		fmt.Printf("batch %d: up to id %d of %d, %d deleted\n", p.Batches, p.ID, p.MaxID, p.Processed+p.Failed)
	}
	res, err := prune.Run(ctx, pool, emails.Info(), opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("deleted %d processed and %d failed jobs\n", res.Processed, res.Failed)
	// Output:
	// batch 1: up to id 2 of 5, 2 deleted
	// batch 2: up to id 4 of 5, 3 deleted
	// batch 3: up to id 5 of 5, 3 deleted
	// deleted 3 processed and 0 failed jobs
}
