package dispatcher_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/execlock"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// Delivery is the README's quick-start kind.
type Delivery struct {
	CustomerID int64  `jobpipe:"customer_id,key"` // jobs of one customer run one at a time, in order
	EventID    string `jobpipe:"event_id,unique"` // one waiting job per event
	URL        string `jobpipe:"url"`
}

// The README's quick start with package dispatcher itself (package jobpipe re-exports what it uses):
// define a kind, enqueue (a duplicate is refused), run a dispatcher.
func Example() {
	ctx := context.Background()
	pool, nodes, cleanup := exampleServers(ctx)
	defer cleanup()

	deliveries := jobinfo.MustDefine[Delivery]("webhook_delivery", jobinfo.MaxAttempts(10))
	// Normally `jobpipe kind new` writes this into a migration; Go migrations can run it directly.
	ddl, _ := deliveries.TableSpec().CreateSQL()
	if _, err := pool.Exec(ctx, ddl); err != nil {
		log.Fatal(err)
	}

	res, err := dispatcher.Enqueue(ctx, pool, deliveries,
		Delivery{CustomerID: 42, EventID: "evt_1", URL: "https://example.com/hook"})
	if err != nil {
		log.Fatal(err)
	}
	again, _ := dispatcher.Enqueue(ctx, pool, deliveries,
		Delivery{CustomerID: 42, EventID: "evt_1", URL: "https://example.com/hook"})
	fmt.Println("enqueued", res.ID, "then a duplicate of", again.ID, again.Duplicate)

	d, err := dispatcher.New(dispatcher.Config{DB: pool, Redis: nodes, RedisPrefix: "example:"})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan string, 1)
	err = dispatcher.Register(d, deliveries, func(ctx context.Context, job *dispatcher.Job[Delivery]) error {
		done <- fmt.Sprintf("delivered %s to customer %d (attempt %d)", job.Data.EventID, job.Data.CustomerID, job.Attempt)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := d.Start(ctx); err != nil { // checks the table against Delivery first
		log.Fatal(err)
	}
	fmt.Println(<-done)
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.Stop(stopCtx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// enqueued 1 then a duplicate of 1 true
	// delivered evt_1 to customer 42 (attempt 1)
}

// exampleServers gives the example a migrated schema of its own and the lock nodes.
func exampleServers(ctx context.Context) (*pgxpool.Pool, []*redis.Client, func()) {
	pool, addrs, drop, err := testenv.ExampleSchema(ctx)
	if err != nil {
		log.Fatal(err)
	}
	nodes, err := execlock.NewClients(addrs...)
	if err != nil {
		log.Fatal(err)
	}
	return pool, nodes, func() {
		for _, n := range nodes { // Stop released every lock
			_ = n.Close()
		}
		drop()
	}
}
