package dispatcher_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// TestStartWarnsOfOutdatedIndexes checks that Start warns once of a lease index an older version
// created, naming its kind and index, says nothing of a table created now, and starts both kinds.
func TestStartWarnsOfOutdatedIndexes(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	outdated := jobinfo.MustDefine[postSync]("outdated_sync")
	current := jobinfo.MustDefine[postSync]("current_sync")
	createKind(t, b.db, outdated)
	createKind(t, b.db, current)
	if _, err := b.db.Exec(context.Background(), `DROP INDEX outdated_sync_lease;
		CREATE INDEX outdated_sync_lease ON outdated_sync (lease_expires_at) WHERE lease_expires_at IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	logs := &logRecorder{}
	cfg := b.cfg
	cfg.Logger = slog.New(logs)
	b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		if err := dispatcher.Register(d, outdated, noopPostSync); err != nil {
			return err
		}
		return dispatcher.Register(d, current, noopPostSync)
	})
	warns := logs.find(slog.LevelWarn, "")
	if len(warns) != 1 || warns[0]["msg"] != "dispatcher: an index of the kind's table is outdated" || warns[0]["kind"] != "outdated_sync" ||
		!strings.HasPrefix(warns[0]["index"], `the lease index "outdated_sync_lease" of "outdated_sync" has the predicate of an older version`) {
		t.Errorf("warnings %v, want one of outdated_sync's lease index", warns)
	}
}
