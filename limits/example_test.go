package limits_test

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
)

// Delivery is a kind keyed by customer: by default one delivery per customer runs at a time.
type Delivery struct {
	CustomerID int64  `jobpipe:"customer_id,key"`
	URL        string `jobpipe:"url"`
}

// Limit a kind's total while dispatchers run, halt it, and let it run again.
func Example() {
	ctx := context.Background()
	pool, cleanup := exampleDB(ctx)
	defer cleanup()
	deliveries := jobinfo.MustDefine[Delivery]("delivery")
	register(ctx, pool, deliveries)

	// At most 3 deliveries at once, across every dispatcher.
	if err := limits.SetMaxRunning(ctx, pool, "delivery", 3); err != nil {
		log.Fatal(err)
	}
	show(ctx, pool, "set")
	// Pausing keeps the limit for Resume; running jobs finish.
	if err := limits.Pause(ctx, pool, "delivery"); err != nil {
		log.Fatal(err)
	}
	show(ctx, pool, "paused")
	if err := limits.Resume(ctx, pool, "delivery"); err != nil {
		log.Fatal(err)
	}
	show(ctx, pool, "resumed")
	if err := limits.ClearMaxRunning(ctx, pool, "delivery"); err != nil {
		log.Fatal(err)
	}
	show(ctx, pool, "cleared")
	// Output:
	// set: stored 3, in force 3
	// paused: stored 3, in force 0
	// resumed: stored 3, in force 3
	// cleared: stored none, in force unlimited
}

func show(ctx context.Context, db jobinfo.DB, what string) {
	k, err := limits.Get(ctx, db, "delivery")
	if err != nil {
		log.Fatal(err)
	}
	stored, inForce := "none", fmt.Sprint(k.EffectiveMaxRunning())
	if k.MaxRunning != nil {
		stored = fmt.Sprint(*k.MaxRunning)
	}
	if k.EffectiveMaxRunning() == limits.Unlimited {
		inForce = "unlimited"
	}
	fmt.Printf("%s: stored %s, in force %s\n", what, stored, inForce)
}

// Per-key limits: a default for every customer, and overrides for some.
func ExampleSetKey() {
	ctx := context.Background()
	pool, cleanup := exampleDB(ctx)
	defer cleanup()
	deliveries := jobinfo.MustDefine[Delivery]("delivery", jobinfo.KeyLimit(2))
	register(ctx, pool, deliveries)

	// Every customer: at most 5 deliveries at once instead of the configured 2.
	if err := limits.SetKeyLimit(ctx, pool, "delivery", 5); err != nil {
		log.Fatal(err)
	}
	// A large customer gets 20; a misbehaving endpoint gets none until resumed.
	if err := limits.SetKey(ctx, pool, "delivery", "42", 20); err != nil {
		log.Fatal(err)
	}
	if err := limits.PauseKey(ctx, pool, "delivery", "7"); err != nil {
		log.Fatal(err)
	}

	kind, err := limits.Get(ctx, pool, "delivery")
	if err != nil {
		log.Fatal(err)
	}
	for _, customer := range []string{"42", "7", "1"} {
		key, err := limits.GetKey(ctx, pool, "delivery", customer)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("customer %s: %d at once\n", customer, kind.EffectiveKeyLimit(key))
	}
	// Output:
	// customer 42: 20 at once
	// customer 7: 0 at once
	// customer 1: 5 at once
}

// List shows every kind's limits and every key override, for a status page or a script.
func ExampleList() {
	ctx := context.Background()
	pool, cleanup := exampleDB(ctx)
	defer cleanup()
	register(ctx, pool, jobinfo.MustDefine[Delivery]("delivery", jobinfo.KeyLimit(2)))
	type Report struct {
		Month string `jobpipe:"month"`
	}
	register(ctx, pool, jobinfo.MustDefine[Report]("report"))
	for _, err := range []error{
		limits.SetMaxRunning(ctx, pool, "report", 1),
		limits.SetKey(ctx, pool, "delivery", "42", 20),
	} {
		if err != nil {
			log.Fatal(err)
		}
	}

	kinds, keys, err := limits.List(ctx, pool, "")
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range kinds {
		fmt.Printf("%s: key %v, total %d, per key %d\n", k.Name, k.KeyColumns, k.EffectiveMaxRunning(), k.EffectiveKeyLimit(limits.Key{}))
	}
	for _, k := range keys {
		fmt.Printf("%s %s: limit %d, paused %t\n", k.Kind, k.Value, *k.Limit, k.Paused)
	}
	// Output:
	// delivery: key [customer_id], total -1, per key 2
	// report: key [], total 1, per key 1
	// delivery 42: limit 20, paused false
}

// A key of several columns is a JSON array of their values; any spacing is accepted, and the form
// the dispatcher compares is what PostgreSQL's json_build_array prints.
func ExampleNormalizeKey() {
	cols := []string{"tenant", "region", "shard"}
	fmt.Println(limits.NormalizeKey(cols, `[ "acme","eu" ,7 ]`))
	_, err := limits.NormalizeKey(cols, `["acme", "eu"]`)
	fmt.Println(err)
	fmt.Println(limits.NormalizeKey([]string{"customer_id"}, "42")) // one column: the column's text
	// Output:
	// ["acme", "eu", 7] <nil>
	// limits: invalid key "[\"acme\", \"eu\"]": 2 values for the 3 key columns (tenant, region, shard)
	// 42 <nil>
}

// What is in force for a key: its pause or override, else the kind's per-key default, else the
// configured limit.
func ExampleKind_EffectiveKeyLimit() {
	three, ten := 3, 10
	kind := limits.Kind{Name: "delivery", ConfiguredKeyLimit: &three}
	fmt.Println(kind.EffectiveKeyLimit(limits.Key{}))
	kind.KeyLimit = &ten // limits.SetKeyLimit
	fmt.Println(kind.EffectiveKeyLimit(limits.Key{}))
	fmt.Println(kind.EffectiveKeyLimit(limits.Key{Limit: &three})) // limits.SetKey
	fmt.Println(kind.EffectiveKeyLimit(limits.Key{Limit: &three, Paused: true}))
	// Output:
	// 3
	// 10
	// 3
	// 0
}

// register creates the kind's table and registers it, as a migration and a dispatcher would.
func register[T any](ctx context.Context, db *pgxpool.Pool, kind *jobinfo.Kind[T]) {
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := db.Exec(ctx, ddl); err != nil {
		log.Fatal(err)
	}
	if err := kind.Register(ctx, db); err != nil {
		log.Fatal(err)
	}
}

// exampleDB gives an example a migrated schema of its own on the test server, and drops it after.
func exampleDB(ctx context.Context) (*pgxpool.Pool, func()) {
	pool, _, drop, err := testenv.ExampleSchema(ctx)
	if err != nil {
		log.Fatal(err)
	}
	return pool, drop
}
