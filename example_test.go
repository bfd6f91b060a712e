package jobpipe_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe"
	"github.com/jobpipe/jobpipe/internal/testenv"
)

// The README's quick start, run: its kind (deliveries, in quickstart_test.go), a job enqueued twice
// (the second time as a duplicate), and a dispatcher that runs it.
func Example() {
	ctx := context.Background()
	pool, addrs, cleanup := exampleSchema(ctx)
	defer cleanup()

	job := Delivery{CustomerID: 42, EventID: "evt_1", URL: "https://example.com/hook"}
	res, err := jobpipe.Enqueue(ctx, pool, deliveries, job)
	if err != nil {
		log.Fatal(err)
	}
	again, err := jobpipe.Enqueue(ctx, pool, deliveries, job)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("enqueued", res.ID, "then a duplicate of", again.ID, again.Duplicate)

	nodes, err := jobpipe.NewRedisClients(addrs...)
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		for _, n := range nodes { // Stop released every lock
			_ = n.Close()
		}
	}()
	// A lock prefix of its own: other runs may share the Redis nodes.
	prefix := fmt.Sprintf("example-%d:", time.Now().UnixNano())
	d, err := jobpipe.New(jobpipe.Config{DB: pool, Redis: nodes, RedisPrefix: prefix})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan string, 1)
	err = jobpipe.Register(d, deliveries, func(ctx context.Context, job *jobpipe.Job[Delivery]) error {
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

// A duplicate of a waiting job: refused with an error naming the job, or merged into it.
func ExampleOnDuplicate() {
	ctx := context.Background()
	pool, _, cleanup := exampleSchema(ctx)
	defer cleanup()

	job := Delivery{CustomerID: 7, EventID: "evt_2", URL: "https://example.com/a"}
	first, err := jobpipe.Enqueue(ctx, pool, deliveries, job)
	if err != nil {
		log.Fatal(err)
	}
	job.URL = "https://example.com/b"
	_, err = jobpipe.Enqueue(ctx, pool, deliveries, job, jobpipe.OnDuplicate(jobpipe.Error))
	var dup *jobpipe.DuplicateError
	if errors.As(err, &dup) {
		fmt.Println("refused:", errors.Is(err, jobpipe.ErrDuplicate), "job", dup.ExistingID, "waits")
	}
	res, err := jobpipe.Enqueue(ctx, pool, deliveries, job, jobpipe.OnDuplicate(jobpipe.ReplaceData))
	if err != nil {
		log.Fatal(err)
	}
	var url string
	if err := pool.QueryRow(ctx, "SELECT url FROM webhook_delivery WHERE id = $1", res.ID).Scan(&url); err != nil {
		log.Fatal(err)
	}
	fmt.Println("merged into job", res.ID, "of", first.ID, "now for", url)
	// Output:
	// refused: true job 1 waits
	// merged into job 1 of 1 now for https://example.com/b
}

// A job enqueued in a transaction exists only if the transaction commits.
func ExampleEnqueueTx() {
	ctx := context.Background()
	pool, _, cleanup := exampleSchema(ctx)
	defer cleanup()

	for _, commit := range []bool{false, true} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			log.Fatal(err)
		}
		job := Delivery{CustomerID: 9, EventID: "evt_3", URL: "https://example.com/hook"}
		if _, err := jobpipe.EnqueueTx(ctx, tx, deliveries, job); err != nil {
			log.Fatal(err)
		}
		end := tx.Rollback
		if commit {
			end = tx.Commit
		}
		if err := end(ctx); err != nil {
			log.Fatal(err)
		}
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM webhook_delivery").Scan(&n); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("committed %v: %d job(s)\n", commit, n)
	}
	// Output:
	// committed false: 0 job(s)
	// committed true: 1 job(s)
}

// exampleSchema gives an example a schema of its own, with jobpipe's tables (testenv applies
// jobpipe.Migrate's migrations) and the quick start's kind table, and the Redis nodes' addresses.
func exampleSchema(ctx context.Context) (*pgxpool.Pool, []string, func()) {
	pool, addrs, drop, err := testenv.ExampleSchema(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Normally `jobpipe kind new` writes this into a migration; Go migrations can run it directly.
	ddl, err := deliveries.TableSpec().CreateSQL()
	if err == nil {
		_, err = pool.Exec(ctx, ddl)
	}
	if err != nil {
		drop()
		log.Fatal(err)
	}
	return pool, addrs, drop
}
