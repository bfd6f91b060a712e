package admin_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// jobLine shows a listed job as "id state key data".
func jobLine(j admin.Job) string {
	return fmt.Sprintf("%d %s %s %s", j.ID, j.State, j.Key, j.Data)
}

func listJobs(t *testing.T, ctx context.Context, k *admin.Kind, db jobinfo.DB, f admin.Filter) []string {
	t.Helper()
	jobs, err := admin.ListJobs(ctx, db, k, f)
	if err != nil {
		t.Fatalf("ListJobs(%+v): %v", f, err)
	}
	lines := []string{}
	for _, j := range jobs {
		lines = append(lines, jobLine(j))
	}
	return lines
}

func TestListJobs(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO notice (user_id, event_id, body) VALUES
	(1, 'e1', 'hi'), (2, 'e2', 'yo'), (1, 'e3', 'x'), (1, 'e4', 'y "quoted"'), (3, 'e5', 'z'), (1, 'e6', 'w')`)
	exec(t, s, `UPDATE notice SET `+setRunning+` WHERE id = 3`)
	exec(t, s, `UPDATE notice SET `+setFailed+` WHERE id = 4`)
	exec(t, s, `UPDATE notice SET `+setProcessed+` WHERE id = 5`)
	k := load(t, s, "notice")
	var (
		j1 = `1 waiting 1 {"user_id":1,"event_id":"e1","body":"hi"}`
		j2 = `2 waiting 2 {"user_id":2,"event_id":"e2","body":"yo"}`
		j3 = `3 running 1 {"user_id":1,"event_id":"e3","body":"x"}`
		j4 = `4 failed 1 {"user_id":1,"event_id":"e4","body":"y \"quoted\""}`
		j5 = `5 processed 3 {"user_id":3,"event_id":"e5","body":"z"}`
		j6 = `6 waiting 1 {"user_id":1,"event_id":"e6","body":"w"}`
	)
	for _, tt := range []struct {
		name   string
		filter admin.Filter
		want   []string
	}{
		{"all, newest first", admin.Filter{}, []string{j6, j5, j4, j3, j2, j1}},
		{"waiting", admin.Filter{State: jobinfo.StateWaiting}, []string{j6, j2, j1}},
		{"running", admin.Filter{State: jobinfo.StateRunning}, []string{j3}},
		{"processed", admin.Filter{State: jobinfo.StateProcessed}, []string{j5}},
		{"failed", admin.Filter{State: jobinfo.StateFailed}, []string{j4}},
		{"one key", admin.Filter{Key: "1"}, []string{j6, j4, j3, j1}},
		{"one key, waiting", admin.Filter{Key: "1", State: jobinfo.StateWaiting}, []string{j6, j1}},
		{"a key without jobs", admin.Filter{Key: "9"}, []string{}},
		{"first page", admin.Filter{Limit: 2}, []string{j6, j5}},
		{"second page", admin.Filter{Limit: 2, BeforeID: 5}, []string{j4, j3}},
		{"last page", admin.Filter{Limit: 2, BeforeID: 3}, []string{j2, j1}},
		{"past the end", admin.Filter{Limit: 2, BeforeID: 1}, []string{}},
		{"a page of one key", admin.Filter{Key: "1", Limit: 1000, BeforeID: 4}, []string{j3, j1}},
	} {
		assertRows(t, tt.name, listJobs(t, ctx, k, s.Pool, tt.filter), tt.want)
	}
}

func TestListJobsDefaultLimit(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO sweep (target) SELECT 't' || i FROM generate_series(1, 60) i`)
	k := load(t, s, "sweep")
	got := listJobs(t, ctx, k, s.Pool, admin.Filter{})
	if len(got) != admin.DefaultLimit || got[0] != `60 waiting  {"target":"t60"}` || got[49] != `11 waiting  {"target":"t11"}` {
		t.Errorf("default page: %d jobs from %q to %q; want 50 from job 60 to job 11", len(got), got[0], got[len(got)-1])
	}
}

func TestListJobsCompositeKey(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO tenant_sync (tenant, shard) VALUES ('acme', 1), ('acme', 2), ('beta', 2), ('a"b', 2)`)
	k := load(t, s, "tenant_sync")
	for _, tt := range []struct {
		key  string
		want []string
	}{
		{`["acme", 2]`, []string{`2 waiting ["acme", 2] {"tenant":"acme","shard":2}`}},
		{`["acme",2]`, []string{`2 waiting ["acme", 2] {"tenant":"acme","shard":2}`}},
		{` [ "beta" , 2 ] `, []string{`3 waiting ["beta", 2] {"tenant":"beta","shard":2}`}},
		{`["a\"b", 2]`, []string{`4 waiting ["a\"b", 2] {"tenant":"a\"b","shard":2}`}},
		{`["acme", 3]`, []string{}},
	} {
		assertRows(t, "key "+tt.key, listJobs(t, ctx, k, s.Pool, admin.Filter{Key: tt.key}), tt.want)
	}
}

func TestListJobsRefusesBadFilters(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	for _, tt := range []struct {
		kind   string
		filter admin.Filter
		want   string
	}{
		{"sweep", admin.Filter{Key: "x"}, `admin: invalid key "x": kind "sweep" has no key, so its jobs cannot be selected by key`},
		{"tenant_sync", admin.Filter{Key: "acme"}, `admin: invalid key for kind "tenant_sync": limits: invalid key "acme": not JSON: ` +
			`the key has 2 columns (tenant, shard), so give a JSON array of their values, for example ["acme", 42]`},
		{"tenant_sync", admin.Filter{Key: `["acme"]`}, `admin: invalid key for kind "tenant_sync": limits: invalid key "[\"acme\"]": 1 values for the 2 key columns (tenant, shard)`},
		{"notice", admin.Filter{State: "done"}, `admin: invalid state "done": use one of waiting, running, processed, failed`},
		{"notice", admin.Filter{Limit: 1001}, `admin: invalid limit 1001: give 1 to 1000 (0 means 50)`},
		{"notice", admin.Filter{Limit: -1}, `admin: invalid limit -1: give 1 to 1000 (0 means 50)`},
		{"notice", admin.Filter{BeforeID: -5}, `admin: invalid before-id -5: job ids are positive (0 starts from the newest)`},
		{"notice", admin.Filter{State: "x", Limit: 5000}, "admin: invalid state \"x\": use one of waiting, running, processed, failed\n" +
			"admin: invalid limit 5000: give 1 to 1000 (0 means 50)"},
	} {
		_, err := admin.ListJobs(ctx, s.Pool, load(t, s, tt.kind), tt.filter)
		if err == nil || err.Error() != tt.want || !errors.Is(err, admin.ErrInvalid) {
			t.Errorf("%s %+v:\n got %v\nwant %s", tt.kind, tt.filter, err, tt.want)
		}
	}
}

func TestParseState(t *testing.T) {
	t.Parallel()
	for _, st := range jobinfo.States {
		if got, err := admin.ParseState(string(st)); got != st || err != nil {
			t.Errorf("ParseState(%q) = %q, %v", st, got, err)
		}
	}
	if got, err := admin.ParseState(""); got != "" || err != nil {
		t.Errorf(`ParseState("") = %q, %v; want any state`, got, err)
	}
	_, err := admin.ParseState("Failed")
	if want := `admin: invalid state "Failed": use one of waiting, running, processed, failed`; err == nil || err.Error() != want || !errors.Is(err, admin.ErrInvalid) {
		t.Errorf("ParseState(Failed) = %v, want %s", err, want)
	}
}

// jobString shows every field of a job, times in UTC.
func jobString(j admin.Job) string {
	ts := func(t *time.Time) string {
		if t == nil {
			return "nil"
		}
		return t.UTC().Format(time.RFC3339)
	}
	str := func(s *string) string {
		if s == nil {
			return "nil"
		}
		return *s
	}
	slot := "nil"
	if j.LockSlot != nil {
		slot = fmt.Sprint(*j.LockSlot)
	}
	return strings.Join([]string{
		fmt.Sprintf("id=%d state=%s key=%s data=%s attempts=%d/%d", j.ID, j.State, j.Key, j.Data, j.AttemptsMade, j.MaxAttempts),
		fmt.Sprintf("created=%s updated=%s after=%s started=%s lease=%s processed=%s failed=%s",
			ts(&j.CreatedAt), ts(&j.UpdatedAt), ts(j.ProcessAfter), ts(j.StartedAt), ts(j.LeaseExpiresAt), ts(j.ProcessedAt), ts(j.FailedAt)),
		fmt.Sprintf("owner=%s error=%s token=%d slot=%s", str(j.LeaseOwner), str(j.LastError), j.LockToken, slot),
	}, "\n")
}

func TestGetJob(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO notice (user_id, event_id, body, attempts_made, created_at, updated_at, process_after, started_at,
	lease_expires_at, lease_owner, lock_token, lock_slot, last_error)
VALUES (7, 'e1', 'hello', 2, '2024-05-01T10:00:00Z', '2024-05-01T10:05:00Z', '2024-05-01T10:01:00Z', '2024-05-01T10:02:00Z',
	'2024-05-01T10:03:00Z', 'node-a', 7, 0, 'timeout'),
	(8, 'e2', 'bye', 3, '2024-05-01T11:00:00Z', '2024-05-01T11:05:00Z', NULL, '2024-05-01T11:02:00Z', NULL, NULL, 3, NULL, 'boom')`)
	exec(t, s, `UPDATE notice SET failed_at = '2024-05-01T11:04:00Z' WHERE id = 2`)
	k := load(t, s, "notice")

	for id, want := range map[int64]string{
		1: `id=1 state=running key=7 data={"user_id":7,"event_id":"e1","body":"hello"} attempts=2/3
created=2024-05-01T10:00:00Z updated=2024-05-01T10:05:00Z after=2024-05-01T10:01:00Z started=2024-05-01T10:02:00Z lease=2024-05-01T10:03:00Z processed=nil failed=nil
owner=node-a error=timeout token=7 slot=0`,
		2: `id=2 state=failed key=8 data={"user_id":8,"event_id":"e2","body":"bye"} attempts=3/3
created=2024-05-01T11:00:00Z updated=2024-05-01T11:05:00Z after=nil started=2024-05-01T11:02:00Z lease=nil processed=nil failed=2024-05-01T11:04:00Z
owner=nil error=boom token=3 slot=nil`,
	} {
		j, err := admin.GetJob(ctx, s.Pool, k, id)
		if err != nil {
			t.Fatal(err)
		}
		if got := jobString(j); got != want {
			t.Errorf("job %d:\n got %s\nwant %s", id, got, want)
		}
	}

	_, err := admin.GetJob(ctx, s.Pool, k, 99)
	if want := `admin: no such job: kind "notice" has no job 99 (finished jobs may have been pruned)`; err == nil || err.Error() != want || !errors.Is(err, admin.ErrJobNotFound) {
		t.Errorf("GetJob(99) = %v, want %s", err, want)
	}
}
