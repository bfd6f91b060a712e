// This file is README.md's quick start, word for word (TestReadmeQuickStart checks it), so that the
// README's code compiles against the API as it is.

package jobpipe_test

import (
	"context"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe"
)

type Delivery struct {
	CustomerID int64  `jobpipe:"customer_id,key"` // jobs of one customer run one at a time, in order
	EventID    string `jobpipe:"event_id,unique"` // one waiting job per event
	URL        string `jobpipe:"url"`
}

var deliveries = jobpipe.MustDefine[Delivery]("webhook_delivery", jobpipe.MaxAttempts(10))

func run(ctx context.Context, pool *pgxpool.Pool) error {
	res, err := jobpipe.Enqueue(ctx, pool, deliveries,
		Delivery{CustomerID: 42, EventID: "evt_1", URL: "https://example.com/hook"},
		jobpipe.ProcessIn(time.Minute))
	if err != nil {
		return err
	}
	log.Println("job", res.ID, "duplicate", res.Duplicate) // a duplicate when evt_1 was already waiting

	nodes, err := jobpipe.NewRedisClients("127.0.0.1:6379") // 1, 3 or 5 independent Redis nodes
	if err != nil {
		return err
	}
	d, err := jobpipe.New(jobpipe.Config{DB: pool, Redis: nodes})
	if err != nil {
		return err
	}
	err = jobpipe.Register(d, deliveries, func(ctx context.Context, job *jobpipe.Job[Delivery]) error {
		return post(ctx, job.Data.URL) // nil: processed; an error: retried with backoff
	})
	if err != nil {
		return err
	}
	if err := d.Start(ctx); err != nil { // checks the table against Delivery, listing every mismatch, and the Redis nodes
		return err
	}
	<-ctx.Done()                              // until the application stops
	return d.Stop(context.WithoutCancel(ctx)) // graceful: running jobs finish, locks are released
}
