package dispatcher_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// The statements a dispatcher repeats for every batch of jobs, and the rescue it runs every few
// seconds, are planned for the table as it is, not as it was when a pooled connection first ran
// them: a kind whose table was created empty and grew without an ANALYZE since (autovacuum off, or
// before its first auto-analyze) must not have each finish or rescue read the whole table.
func TestRepeatedStatementsNeverReadTheWholeTable(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("grown_job")
	createKind(t, b.db, kind)
	ctx := context.Background()
	cfg := b.cfg
	cfg.RescueInterval, cfg.PruneInterval = 50*time.Millisecond, time.Hour
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(context.Context, *dispatcher.Job[plainJob]) error { return nil })
	})
	// One job at a time, so that each pooled connection runs the finish more than the five times
	// after which PostgreSQL may keep a generic plan for it.
	runOneByOne := func(n int) {
		t.Helper()
		for range n {
			want := d.Stats().Processed + 1
			if _, err := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 1, Note: "x"}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the job processed", 10*time.Second, func() (bool, error) { return d.Stats().Processed >= want, nil })
		}
	}
	runOneByOne(40)
	if _, err := b.db.Exec(ctx, `INSERT INTO grown_job (n, note, attempts_made, processed_at)
		SELECT g, 'done', 1, now() FROM generate_series(1, 30000) g`); err != nil {
		t.Fatal(err)
	}
	// A server backend reports its table counters at most once a second while busy, and within ten
	// seconds of going idle.
	const reported = 11 * time.Second
	seqScans := func() int64 {
		t.Helper()
		time.Sleep(reported)
		var n int64
		if err := b.db.QueryRow(ctx, `SELECT seq_scan FROM pg_stat_user_tables
			WHERE relid = 'grown_job'::regclass`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := seqScans()
	runOneByOne(40)
	if after := seqScans(); after != before {
		t.Errorf("the table was read in full %d times while 40 jobs ran and the rescue looked every %v; want none",
			after-before, cfg.RescueInterval)
	}
}
