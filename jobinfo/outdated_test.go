package jobinfo_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// TestOutdatedIndexes checks that a keyed kind's lease index as an older version created it is
// reported, by name and with the predicate to create it with, and that neither a table created now,
// nor its running-slots index, which shares the older predicate, nor a kind without a key, which
// looks no key up, is.
func TestOutdatedIndexes(t *testing.T) {
	older := `DROP INDEX %[1]s_lease;
		CREATE INDEX %[1]s_lease ON %[1]s (lease_expires_at) WHERE lease_expires_at IS NOT NULL`
	t.Run("key", func(t *testing.T) {
		db := setup(t)
		kind := jobinfo.MustDefine[delivery]("webhook_delivery")
		createDelivery(t, db)
		lines, err := kind.Info().OutdatedIndexes(t.Context(), db)
		if err != nil || len(lines) != 0 {
			t.Fatalf("a table created now: %q, %v; want none", lines, err)
		}
		exec(t, db, fmt.Sprintf(older, "webhook_delivery"))
		lines, err = kind.Info().OutdatedIndexes(t.Context(), db)
		want := []string{`the lease index "webhook_delivery_lease" of "webhook_delivery" has the predicate of an older version, ` +
			`which the lookups of one key's running jobs also match: create it again with WHERE lease_expires_at IS NOT NULL AND processed_at IS NULL AND failed_at IS NULL ` +
			"(as TableSpec.CreateSQL or `jobpipe kind new` print it), then drop the old one"}
		if err != nil || !slices.Equal(lines, want) {
			t.Errorf("got %q, %v\nwant %q", lines, err, want)
		}
	})
	t.Run("no key", func(t *testing.T) {
		db := setup(t)
		kind := jobinfo.MustDefine[plainDelivery]("plain_delivery")
		createTable(t, db, kind.TableSpec())
		exec(t, db, fmt.Sprintf(older, "plain_delivery"))
		if lines, err := kind.Info().OutdatedIndexes(t.Context(), db); err != nil || len(lines) != 0 {
			t.Errorf("a kind without a key: %q, %v; want none", lines, err)
		}
	})
}

type plainDelivery struct {
	Payload string `jobpipe:"payload"`
}
