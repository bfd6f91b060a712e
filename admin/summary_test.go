package admin_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/limits"
)

// summaryString shows a Summary with its ages rounded to the minute; the tests set times minutes
// apart, so the statements' few milliseconds never change a rounded age.
func summaryString(s admin.Summary) string {
	return fmt.Sprintf("%s waiting=%d due=%d running=%d processed=%d failed=%d max=%d paused=%t oldest=%v lag=%v",
		s.Kind, s.Waiting, s.Due, s.Running, s.Processed, s.Failed, s.MaxRunning, s.Paused,
		s.OldestWaiting.Round(time.Minute), s.ScheduleLag.Round(time.Minute))
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO sweep (target, created_at, process_after) VALUES
	('due since 30 min', now() - interval '40 minutes', now() - interval '30 minutes'),
	('due since created', now() - interval '10 minutes', NULL),
	('scheduled', now() - interval '5 minutes', now() + interval '1 hour'),
	('running', now() - interval '2 hours', NULL), ('processed', now() - interval '2 hours', NULL),
	('processed', now() - interval '2 hours', NULL), ('failed', now() - interval '2 hours', NULL)`)
	exec(t, s, `UPDATE sweep SET `+setRunning+` WHERE id = 4`)
	exec(t, s, `UPDATE sweep SET `+setProcessed+` WHERE id IN (5, 6)`)
	exec(t, s, `UPDATE sweep SET `+setFailed+` WHERE id = 7`)
	k := load(t, s, "sweep")

	summarize := func() string {
		t.Helper()
		sum, err := admin.Summarize(ctx, s.Pool, k)
		if err != nil {
			t.Fatal(err)
		}
		return summaryString(sum)
	}
	const counts = "sweep waiting=3 due=2 running=1 processed=2 failed=1"
	for _, step := range []struct {
		name   string
		change func() error
		want   string
	}{
		{"no limit", func() error { return nil }, counts + " max=-1 paused=false oldest=40m0s lag=30m0s"},
		{"a total limit", func() error { return limits.SetMaxRunning(ctx, s.Pool, "sweep", 4) }, counts + " max=4 paused=false oldest=40m0s lag=30m0s"},
		{"paused", func() error { return limits.Pause(ctx, s.Pool, "sweep") }, counts + " max=0 paused=true oldest=40m0s lag=30m0s"},
	} {
		if err := step.change(); err != nil {
			t.Fatal(err)
		}
		if got := summarize(); got != step.want {
			t.Errorf("%s:\n got %s\nwant %s", step.name, got, step.want)
		}
	}

	// The ages are the database's: exact to the statement's now(), within the few milliseconds since.
	exec(t, s, `DELETE FROM sweep WHERE id <> 3`)
	if got, want := summarize(), "sweep waiting=1 due=0 running=0 processed=0 failed=0 max=0 paused=true oldest=5m0s lag=0s"; got != want {
		t.Errorf("one scheduled job:\n got %s\nwant %s", got, want)
	}
	sum, err := admin.Summarize(ctx, s.Pool, k)
	if err != nil {
		t.Fatal(err)
	}
	if d := sum.OldestWaiting - 5*time.Minute; d < 0 || d > 5*time.Second {
		t.Errorf("OldestWaiting = %v, want 5 min and a few milliseconds", sum.OldestWaiting)
	}
}

func TestSummarizeAll(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO notice (user_id, event_id, body, created_at) VALUES (1, 'e1', 'a', now() - interval '3 minutes'), (1, 'e2', 'b', now())`)
	exec(t, s, `UPDATE notice SET `+setFailed+` WHERE id = 2`)
	exec(t, s, `INSERT INTO tenant_sync (tenant, shard, created_at) VALUES ('acme', 1, now() - interval '1 hour')`)
	if err := limits.SetMaxRunning(ctx, s.Pool, "tenant_sync", 7); err != nil {
		t.Fatal(err)
	}

	all, err := admin.SummarizeAll(ctx, s.Pool)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sum := range all {
		got = append(got, summaryString(sum))
	}
	assertRows(t, "summaries", got, []string{
		"notice waiting=1 due=1 running=0 processed=0 failed=1 max=-1 paused=false oldest=3m0s lag=3m0s",
		"sweep waiting=0 due=0 running=0 processed=0 failed=0 max=-1 paused=false oldest=0s lag=0s",
		"tenant_sync waiting=1 due=1 running=0 processed=0 failed=0 max=7 paused=false oldest=1h0m0s lag=1h0m0s",
	})
}

// A kind whose table was dropped does not hide the others: they are summarised, and the error names
// the missing table.
func TestSummarizeAllWithAMissingTable(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	exec(t, s, `DROP TABLE sweep`)
	all, err := admin.SummarizeAll(ctx, s.Pool)
	if !errors.Is(err, admin.ErrTableMissing) || !strings.Contains(err.Error(), `kind "sweep" has no table "sweep"`) {
		t.Fatalf("SummarizeAll: error %v; want ErrTableMissing naming sweep's table", err)
	}
	var got []string
	for _, sum := range all {
		got = append(got, sum.Kind)
	}
	assertRows(t, "kinds summarised", got, []string{"notice", "tenant_sync"})
	kinds, err := admin.Kinds(ctx, s.Pool)
	if !errors.Is(err, admin.ErrTableMissing) || len(kinds) != 2 {
		t.Fatalf("Kinds: %d kinds, error %v; want notice and tenant_sync, and ErrTableMissing", len(kinds), err)
	}
	if _, err := admin.LoadKind(ctx, s.Pool, "sweep"); !errors.Is(err, admin.ErrTableMissing) {
		t.Errorf("LoadKind(sweep): error %v; want ErrTableMissing", err)
	}
}

// A kind's summary lists the dispatchers whose lock calls for it keep failing, as recorded in
// jobpipe_lock_waits, oldest first; a row not refreshed for LockWaitFresh (a crashed dispatcher's)
// is left out.
func TestSummaryLockWaits(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO jobpipe_lock_waits (kind, node_name, since, error, updated_at) VALUES
	('tenant_sync', 'web-2', '2030-01-02 03:05:00+00', 'node 10.0.0.5:6379: dial tcp 10.0.0.5:6379: connect: connection refused', now()),
	('tenant_sync', 'web-1', '2030-01-02 03:04:05+00', 'node 10.0.0.5:6379: i/o timeout; node 10.0.0.6:6379: i/o timeout', now() - interval '100 seconds'),
	('tenant_sync', 'crashed', '2030-01-02 01:00:00+00', 'node 10.0.0.5:6379: EOF', now() - interval '121 seconds'),
	('notice', 'crashed', '2030-01-02 01:00:00+00', 'node 10.0.0.5:6379: EOF', now() - interval '1 hour')`)
	want := []string{
		"waiting for Redis quorum since 2030-01-02 03:04:05 UTC in dispatcher web-1 (node 10.0.0.5:6379: i/o timeout; node 10.0.0.6:6379: i/o timeout)",
		"waiting for Redis quorum since 2030-01-02 03:05:00 UTC in dispatcher web-2 (node 10.0.0.5:6379: dial tcp 10.0.0.5:6379: connect: connection refused)",
	}
	text := func(ws []admin.LockWait) []string {
		var out []string
		for _, w := range ws {
			out = append(out, w.String())
		}
		return out
	}
	sum, err := admin.Summarize(ctx, s.Pool, load(t, s, "tenant_sync"))
	if err != nil {
		t.Fatal(err)
	}
	assertRows(t, "Summarize's lock waits", text(sum.LockWaits), want)
	all, err := admin.SummarizeAll(ctx, s.Pool)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, sum := range all {
		got[sum.Kind] = text(sum.LockWaits)
	}
	if len(got["notice"]) != 0 || len(got["sweep"]) != 0 {
		t.Errorf("lock waits of notice %q and sweep %q, want none", got["notice"], got["sweep"])
	}
	assertRows(t, "SummarizeAll's lock waits of tenant_sync", got["tenant_sync"], want)
}
