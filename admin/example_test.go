package admin_test

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/uniqueness"
)

// Delivery is a kind as the application defines it. Package admin needs none of this: it reads the
// kind from the registry and the table.
type Delivery struct {
	CustomerID int64  `jobpipe:"customer_id,key"`
	EventID    string `jobpipe:"event_id,unique"`
	URL        string `jobpipe:"url"`
}

// exampleDB gives an Example a migrated schema of its own with the kind delivery registered.
func exampleDB(ctx context.Context) (*pgxpool.Pool, func()) {
	pool, _, drop, err := testenv.ExampleSchema(ctx)
	if err != nil {
		log.Fatal(err)
	}
	deliveries := jobinfo.MustDefine[Delivery]("delivery")
	ddl, err := deliveries.TableSpec().CreateSQL()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, ddl); err != nil {
		log.Fatal(err)
	}
	if err := deliveries.Register(ctx, pool); err != nil {
		log.Fatal(err)
	}
	return pool, drop
}

// Enqueue a job from JSON, as `jobpipe enqueue` does: the values are checked against the table's
// columns, and a duplicate of a waiting job is handled as the application's own enqueues are.
func ExampleEnqueue() {
	ctx := context.Background()
	pool, drop := exampleDB(ctx)
	defer drop()
	k, err := admin.LoadKind(ctx, pool, "delivery")
	if err != nil {
		log.Fatal(err)
	}

	res, err := admin.Enqueue(ctx, pool, k, admin.EnqueueRequest{
		Data: []byte(`{"customer_id": 42, "event_id": "evt_1", "url": "https://example.com/hook"}`)})
	fmt.Println(res.ID, res.Duplicate, err)
	res, err = admin.Enqueue(ctx, pool, k, admin.EnqueueRequest{
		Data:        []byte(`{"customer_id": 42, "event_id": "evt_1", "url": "https://example.com/other"}`),
		OnDuplicate: uniqueness.Replace})
	fmt.Println(res.ID, res.Duplicate, err)
	_, err = admin.Enqueue(ctx, pool, k, admin.EnqueueRequest{Data: []byte(`{"customer_id": "42", "url": 7}`)})
	fmt.Println(err)

	job, err := admin.GetJob(ctx, pool, k, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.State, job.Key, string(job.Data))
	// Output:
	// 1 false <nil>
	// 1 true <nil>
	// admin: invalid data for kind "delivery": column "customer_id" (bigint): "42" is a string, not an integer; column "event_id" (text): missing: the column is NOT NULL and has no default; column "url" (text): 7 is a number, not a string
	// waiting 42 {"customer_id":42,"event_id":"evt_1","url":"https://example.com/other"}
}

// Summarize a kind, then act on its jobs as an operator: discard one, retry it, and look again.
func ExampleSummarize() {
	ctx := context.Background()
	pool, drop := exampleDB(ctx)
	defer drop()
	k, err := admin.LoadKind(ctx, pool, "delivery")
	if err != nil {
		log.Fatal(err)
	}
	for _, event := range []string{"evt_1", "evt_2", "evt_3"} {
		data := fmt.Sprintf(`{"customer_id": 42, "event_id": %q, "url": "https://example.com/hook"}`, event)
		if _, err := admin.Enqueue(ctx, pool, k, admin.EnqueueRequest{Data: []byte(data)}); err != nil {
			log.Fatal(err)
		}
	}
	show := func() {
		s, err := admin.Summarize(ctx, pool, k)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %d waiting (%d due), %d running, %d failed, limit %d\n", s.Kind, s.Waiting, s.Due, s.Running, s.Failed, s.MaxRunning)
	}
	show()

	res, err := admin.Discard(ctx, pool, k, []int64{2, 9}, "wrong URL")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("discarded %v, skipped %v\n", res.Changed, res.Skipped)
	show()
	failed, err := admin.ListJobs(ctx, pool, k, admin.Filter{State: jobinfo.StateFailed})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range failed {
		fmt.Println(j.ID, *j.LastError)
	}
	n, err := admin.RetryAllFailed(ctx, pool, k, func(done, total int64) { fmt.Printf("retried %d of %d\n", done, total) })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "retried")
	show()
	// Output:
	// delivery: 3 waiting (3 due), 0 running, 0 failed, limit -1
	// discarded [2], skipped [{9 no such job}]
	// delivery: 2 waiting (2 due), 0 running, 1 failed, limit -1
	// 2 discarded by an operator: wrong URL
	// retried 1 of 1
	// 1 retried
	// delivery: 3 waiting (3 due), 0 running, 0 failed, limit -1
}
