package execlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jobpipe/jobpipe/execlock"
	"github.com/redis/go-redis/v9"
)

// exampleLocker returns a Locker over one Redis node: the first of TEST_REDIS_URL, or
// 127.0.0.1:6379. Production uses 1, 3 or 5 independent nodes.
func exampleLocker(prefix string) (*execlock.Locker, func()) {
	node := "127.0.0.1:6379"
	if list := os.Getenv("TEST_REDIS_URL"); list != "" {
		node, _, _ = strings.Cut(list, ",")
	}
	clients, err := execlock.NewClients(node)
	if err != nil {
		log.Fatal(err)
	}
	locker, err := execlock.New(&execlock.Config{Nodes: clients, Prefix: prefix, NodeName: "example"})
	if err != nil {
		log.Fatal(err)
	}
	return locker, func() {
		locker.Close()
		for _, c := range clients {
			_ = c.Close()
		}
	}
}

// The life of one job of a keyed kind: the dispatcher's queue lock, the worker's execution lock,
// heartbeats while the handler runs, and the release.
func Example() {
	locker, done := exampleLocker("jobpipe:example:")
	defer done()
	ctx := context.Background()

	// Dispatcher: a free queue slot of the key (running limit 1), while it hands the job over.
	q, err := locker.TryQueueSlot(ctx, "email", "user-42", 1)
	if err != nil {
		log.Fatal(err)
	}

	// Worker: the execution lock of the same slot; then the queue lock is no longer needed.
	x, err := locker.TryExec(ctx, "email", "user-42", q.Slot())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acquired slot", x.Slot())
	if err := q.Release(ctx); err != nil {
		log.Fatal(err)
	}

	// No other worker runs the key meanwhile.
	_, err = locker.TryExec(ctx, "email", "user-42", 0)
	fmt.Println("second attempt:", err)
	fmt.Println("taken:", errors.Is(err, execlock.ErrTaken))

	// Heartbeats while the handler runs (every ExecTTL/3, say); ErrLost would mean: stop the job.
	fmt.Println("heartbeat:", x.Extend(ctx))
	fmt.Println("release:", x.Release(ctx))

	// Output:
	// acquired slot 0
	// second attempt: execlock: lock taken: jobpipe:example:x:email:user-42:0: lock already taken, locked nodes: [0]
	// taken: true
	// heartbeat: <nil>
	// release: <nil>
}

// A key with a running limit of 2: two workers get the two slots, in a random order; a third is
// refused until one of them releases.
func ExampleLocker_TryExecSlot() {
	locker, done := exampleLocker("jobpipe:example-slots:")
	defer done()
	ctx := context.Background()

	var slots []int
	var locks []*execlock.Lock
	for range 2 {
		lk, err := locker.TryExecSlot(ctx, "sync", "shop-7", 2)
		if err != nil {
			log.Fatal(err)
		}
		slots = append(slots, lk.Slot())
		locks = append(locks, lk)
	}
	slices.Sort(slots)
	fmt.Println("slots:", slots)

	_, err := locker.TryExecSlot(ctx, "sync", "shop-7", 2)
	fmt.Println("third:", errors.Is(err, execlock.ErrTaken))

	for _, lk := range locks {
		if err := lk.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("failed attempts counted:", locker.Stats().Taken >= 2)

	// Output:
	// slots: [0 1]
	// third: true
	// failed attempts counted: true
}

// Lock nodes are given as host:port or as redis:// URLs.
func ExampleParseNode() {
	for _, node := range []string{"10.0.0.5:6379", "redis://:secret@redis-b:6380/2", "redis-c"} {
		opts, err := execlock.ParseNode(node)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(opts.Addr, "db", opts.DB)
	}
	// Output:
	// 10.0.0.5:6379 db 0
	// redis-b:6380 db 2
	// execlock: invalid Redis node "redis-c": want host:port or redis://host:port[/db]: address redis-c: missing port in address
}

// NewClient keeps what the options set and adds what lock calls need.
func ExampleNewClient() {
	c := execlock.NewClient(&redis.Options{Addr: "10.0.0.5:6379", ReadTimeout: 2 * time.Second})
	defer c.Close()
	o := c.Options()
	fmt.Println("context deadlines honoured:", o.ContextTimeoutEnabled)
	fmt.Println("read timeout:", o.ReadTimeout, "dial timeout:", o.DialTimeout, "retries:", o.MaxRetries)
	// Output:
	// context deadlines honoured: true
	// read timeout: 2s dial timeout: 500ms retries: 1
}
