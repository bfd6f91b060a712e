package jobinfo_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// TestOutdatedIndexes checks that the ready and lease indexes an older version created are reported,
// by name and with the predicate to create them with, and that neither a table created now nor its
// key-ready and running-slots indexes, which share those older predicates, are; nor those of a kind
// without a key, which looks no key up.
func TestOutdatedIndexes(t *testing.T) {
	for _, order := range []jobinfo.Order{jobinfo.OrderCreated, jobinfo.OrderProcessAfter} {
		t.Run(string(order), func(t *testing.T) {
			db := setup(t)
			kind := jobinfo.MustDefine[delivery]("webhook_delivery", jobinfo.WithOrder(order))
			create, err := kind.TableSpec().CreateSQL()
			if err != nil {
				t.Fatal(err)
			}
			exec(t, db, create)
			lines, err := kind.Info().OutdatedIndexes(t.Context(), db)
			if err != nil || len(lines) != 0 {
				t.Fatalf("a table created now: %q, %v; want none", lines, err)
			}
			cols := "id"
			if order == jobinfo.OrderProcessAfter {
				cols = "(COALESCE(process_after, created_at)), id"
			}
			exec(t, db, fmt.Sprintf(`DROP INDEX webhook_delivery_ready, webhook_delivery_lease;
				CREATE INDEX webhook_delivery_ready ON webhook_delivery (%s) WHERE lease_expires_at IS NULL AND processed_at IS NULL AND failed_at IS NULL;
				CREATE INDEX webhook_delivery_lease ON webhook_delivery (lease_expires_at) WHERE lease_expires_at IS NOT NULL`, cols))
			lines, err = kind.Info().OutdatedIndexes(t.Context(), db)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{
				`the lease index "webhook_delivery_lease" of "webhook_delivery" has the predicate of an older version, which the lookups of one key's jobs also match: create it again with WHERE lease_expires_at IS NOT NULL AND processed_at IS NULL AND failed_at IS NULL (as TableSpec.CreateSQL or ` + "`jobpipe kind new`" + ` print it), then drop the old one`,
				`the ready index "webhook_delivery_ready" of "webhook_delivery" has the predicate of an older version, which the lookups of one key's jobs also match: create it again with WHERE lease_expires_at IS NULL AND processed_at IS NULL AND failed_at IS NULL AND (lease_expires_at IS NULL) IS TRUE (as TableSpec.CreateSQL or ` + "`jobpipe kind new`" + ` print it), then drop the old one`,
			}
			if !slices.Equal(lines, want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
			}
		})
	}
	t.Run("no key", func(t *testing.T) {
		db := setup(t)
		kind := jobinfo.MustDefine[plainDelivery]("plain_delivery")
		create, err := kind.TableSpec().CreateSQL()
		if err != nil {
			t.Fatal(err)
		}
		exec(t, db, create)
		exec(t, db, `DROP INDEX plain_delivery_ready, plain_delivery_lease;
			CREATE INDEX plain_delivery_ready ON plain_delivery (id) WHERE lease_expires_at IS NULL AND processed_at IS NULL AND failed_at IS NULL;
			CREATE INDEX plain_delivery_lease ON plain_delivery (lease_expires_at) WHERE lease_expires_at IS NOT NULL`)
		if lines, err := kind.Info().OutdatedIndexes(t.Context(), db); err != nil || len(lines) != 0 {
			t.Errorf("a kind without a key: %q, %v; want none", lines, err)
		}
	})
}

type plainDelivery struct {
	Payload string `jobpipe:"payload"`
}
