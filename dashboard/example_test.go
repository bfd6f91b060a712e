package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/jobpipe/jobpipe/dashboard"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// Delivery is the kind of the examples.
type Delivery struct {
	CustomerID int64  `jobpipe:"customer_id,key"`
	URL        string `jobpipe:"url"`
}

// Serve the dashboard and read the counts its overview refreshes itself from.
func Example() {
	ctx := context.Background()
	pool, _, drop, err := testenv.ExampleSchema(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer drop()
	kind := jobinfo.MustDefine[Delivery]("delivery")
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, ddl); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO delivery (customer_id, url) VALUES (1, 'https://example.com/a'), (2, 'https://example.com/b')`); err != nil {
		log.Fatal(err)
	}

	cfg := dashboard.Config{DB: pool, Token: "0123456789abcdef0123456789abcdef"}
	if err := cfg.CheckListen(":8080"); err != nil { // with a token, any address will do
		log.Fatal(err)
	}
	h, err := dashboard.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h) // in production: http.ListenAndServe(":8080", h)
	defer srv.Close()

	resp, err := srv.Client().Get(srv.URL + "/api/summary")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var summary struct {
		Kinds []struct {
			Kind    string
			Waiting int64
			Failed  int64
			Text    map[string]string
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&summary); err != nil {
		log.Fatal(err)
	}
	for _, k := range summary.Kinds {
		fmt.Printf("%s: %d waiting, %d failed, running %s\n", k.Kind, k.Waiting, k.Failed, k.Text["running"])
	}
	// Output:
	// delivery: 2 waiting, 0 failed, running 0 / ∞
}

// A dashboard that lets anyone change jobs is refused anywhere but on loopback.
func ExampleConfig_CheckListen() {
	open := dashboard.Config{} // no credentials, not read-only
	fmt.Println(open.CheckListen("127.0.0.1:8080"))
	fmt.Println(open.CheckListen(":8080") != nil)
	readOnly := dashboard.Config{ReadOnly: true}
	fmt.Println(readOnly.CheckListen(":8080"))
	// Output:
	// <nil>
	// true
	// <nil>
}
