package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

// setupJobs gives the test a migrated schema with two registered kinds and jobs in every state:
//
//	webhook (keyed by customer_id): 1 waiting, 2 scheduled in a day, 3 running, 4 processed,
//	  5 and 6 failed, 7 waiting of customer 8
//	mail (unique address, no key): no jobs
//
// Times are fixed where the output shows them.
func setupJobs(t *testing.T) *testenv.Schema {
	t.Helper()
	s := testenv.NewSchema(t)
	ctx := context.Background()
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	type webhook struct {
		CustomerID int64  `jobpipe:"customer_id,key"`
		URL        string `jobpipe:"url"`
	}
	type mail struct {
		Address string          `jobpipe:"address,unique"`
		Body    json.RawMessage `jobpipe:"body"`
	}
	hooks := jobinfo.MustDefine[webhook]("webhook", jobinfo.KeyLimit(3))
	mails := jobinfo.MustDefine[mail]("mail", jobinfo.NoKey())
	createTables(t, s, hooks.TableSpec(), mails.TableSpec())
	if err := hooks.Register(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	if err := mails.Register(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	_, err := s.Pool.Exec(ctx, `
INSERT INTO webhook (id, customer_id, url, created_at, process_after, started_at, lease_expires_at, lease_owner,
	attempts_made, lock_token, lock_slot, last_error, processed_at, failed_at) VALUES
(1, 7, 'https://a.example/1', '2026-01-02 03:04:05Z', NULL, NULL, NULL, NULL, 0, 0, NULL, NULL, NULL, NULL),
(2, 7, 'https://a.example/2', '2026-01-02 03:04:06Z', now() + interval '1 day', NULL, NULL, NULL, 0, 0, NULL, NULL, NULL, NULL),
(3, 7, 'https://a.example/3', '2026-01-02 03:04:07Z', NULL, now(), now() + interval '30 s', 'node-a:1', 1, 1, 0, NULL, NULL, NULL),
(4, 7, 'https://a.example/4', '2026-01-02 03:04:08Z', NULL, now(), NULL, NULL, 1, 1, NULL, NULL, now(), NULL),
(5, 7, 'https://a.example/5', '2026-01-02 03:04:09Z', NULL, now(), NULL, NULL, 25, 25, NULL, 'HTTP 500', NULL, now()),
(6, 8, 'https://a.example/6', '2026-01-02 03:04:10Z', NULL, now(), NULL, NULL, 25, 25, NULL, 'timeout', NULL, now()),
(7, 8, 'https://a.example/7', '2026-01-02 03:04:11Z', NULL, NULL, NULL, NULL, 0, 0, NULL, NULL, NULL, NULL);
SELECT setval(pg_get_serial_sequence('webhook', 'id'), 7);`)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jobRows is each webhook job as "id state attempts process_after-set last_error", by id.
func jobRows(t *testing.T, s *testenv.Schema, table string) []string {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(), `SELECT format('%s %s attempts=%s due_later=%s err=%s', id,
	CASE WHEN failed_at IS NOT NULL THEN 'failed' WHEN processed_at IS NOT NULL THEN 'processed'
	     WHEN lease_expires_at IS NOT NULL THEN 'running' ELSE 'waiting' END,
	attempts_made, coalesce(process_after > now(), false)::text, coalesce(last_error, '-'))
FROM `+pgx.Identifier{table}.Sanitize()+` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

var initialWebhooks = []string{
	"1 waiting attempts=0 due_later=false err=-",
	"2 waiting attempts=0 due_later=true err=-",
	"3 running attempts=1 due_later=false err=-",
	"4 processed attempts=1 due_later=false err=-",
	"5 failed attempts=25 due_later=false err=HTTP 500",
	"6 failed attempts=25 due_later=false err=timeout",
	"7 waiting attempts=0 due_later=false err=-",
}

func assertRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

func TestKindsCounts(t *testing.T) {
	t.Parallel()
	s := setupJobs(t)
	if code, _, stderr := jp(t, s, "limit", "set", "webhook", "5"); code != 0 {
		t.Fatalf("limit set: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := jp(t, s, "kinds", "--json")
	if code != 0 || stderr != "" {
		t.Fatalf("kinds --json: exit %d, stderr %q", code, stderr)
	}
	var got []kindJSONRow
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("kinds --json printed %q: %v", stdout, err)
	}
	if len(got) != 2 || got[0].Kind != "mail" || got[1].Kind != "webhook" {
		t.Fatalf("kinds --json: got %+v, want mail then webhook", got)
	}
	wh := got[1]
	if wh.Waiting != 3 || wh.Due != 2 || wh.Running != 1 || wh.Processed != 1 || wh.Failed != 2 ||
		wh.MaxRunning == nil || *wh.MaxRunning != 5 || wh.Paused {
		t.Errorf("webhook counts: got %+v", wh)
	}
	// The oldest waiting job was created on 2026-01-02; the most overdue due job is the same one.
	if wh.OldestWaitingSeconds < 1e6 || wh.ScheduleLagSeconds < 1e6 || wh.OldestWaitingSeconds != wh.ScheduleLagSeconds {
		t.Errorf("webhook ages: oldest %v s, lag %v s; want the age of job 1 in both", wh.OldestWaitingSeconds, wh.ScheduleLagSeconds)
	}
	if m := got[0]; m.Waiting != 0 || m.MaxRunning != nil || m.OldestWaitingSeconds != 0 || m.ScheduleLagSeconds != 0 {
		t.Errorf("mail: got %+v, want no jobs and no total limit", m)
	}

	code, stdout, _ = jp(t, s, "kinds")
	want := regexp.MustCompile(`^KIND +WAITING +DUE +RUNNING +PROCESSED +FAILED +OLDEST WAITING +SCHEDULE LAG
mail +0 +0 +0 +0 +0 +- +-
webhook +3 +2 +1/5 +1 +2 +\d+h\d+m\d+s +\d+h\d+m\d+s
$`)
	if code != 0 || !want.MatchString(stdout) {
		t.Errorf("kinds: exit %d, printed:\n%s", code, stdout)
	}
	jp(t, s, "pause", "webhook")
	_, stdout, _ = jp(t, s, "kinds")
	if !strings.Contains(stdout, " 1 (paused) ") {
		t.Errorf("kinds after pause: want running shown as \"1 (paused)\", got:\n%s", stdout)
	}
}

// A keyed kind whose dispatchers wait for a quorum of Redis lock nodes says so below the table, one
// line per dispatcher, and in --json; a row its dispatcher stopped refreshing is not shown.
func TestKindsLockWaits(t *testing.T) {
	t.Parallel()
	s := setupJobs(t)
	_, err := s.Pool.Exec(context.Background(), `INSERT INTO jobpipe_lock_waits (kind, node_name, since, error, updated_at) VALUES
	('webhook', 'web-1', '2030-01-02 03:04:05Z', 'node 127.0.0.1:6390: dial tcp 127.0.0.1:6390: connect: connection refused', now()),
	('webhook', 'web-2', '2030-01-02 03:04:09Z', 'node 127.0.0.1:6390: dial tcp 127.0.0.1:6390: connect: connection refused', now()),
	('mail', 'crashed', '2030-01-01 00:00:00Z', 'node 127.0.0.1:6390: EOF', now() - interval '1 hour')`)
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := jp(t, s, "kinds")
	want := regexp.MustCompile(`^KIND +WAITING +DUE +RUNNING +PROCESSED +FAILED +OLDEST WAITING +SCHEDULE LAG
mail +0 +0 +0 +0 +0 +- +-
webhook +3 +2 +1 +1 +2 +\d+h\d+m\d+s +\d+h\d+m\d+s

webhook: waiting for Redis quorum since 2030-01-02 03:04:05 UTC in dispatcher web-1 \(node 127\.0\.0\.1:6390: dial tcp 127\.0\.0\.1:6390: connect: connection refused\)
webhook: waiting for Redis quorum since 2030-01-02 03:04:09 UTC in dispatcher web-2 \(node 127\.0\.0\.1:6390: dial tcp 127\.0\.0\.1:6390: connect: connection refused\)
$`)
	if code != 0 || stderr != "" || !want.MatchString(stdout) {
		t.Errorf("kinds: exit %d, stderr %q, printed:\n%s", code, stderr, stdout)
	}
	code, stdout, stderr = jp(t, s, "kinds", "--json")
	if code != 0 || stderr != "" {
		t.Fatalf("kinds --json: exit %d, stderr %q", code, stderr)
	}
	var got []struct {
		Kind      string            `json:"kind"`
		LockWaits []json.RawMessage `json:"lock_waits"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("kinds --json printed %q: %v", stdout, err)
	}
	const refused = `"error":"node 127.0.0.1:6390: dial tcp 127.0.0.1:6390: connect: connection refused"`
	wantJSON := []string{"mail: []", `webhook: [{"dispatcher":"web-1","since":"2030-01-02T03:04:05Z",` + refused + `} ` +
		`{"dispatcher":"web-2","since":"2030-01-02T03:04:09Z",` + refused + `}]`}
	var gotJSON []string
	for _, k := range got {
		var ws []string
		for _, w := range k.LockWaits {
			var b bytes.Buffer
			if err := json.Compact(&b, w); err != nil {
				t.Fatal(err)
			}
			ws = append(ws, b.String())
		}
		gotJSON = append(gotJSON, k.Kind+": ["+strings.Join(ws, " ")+"]")
	}
	assertRows(t, "kinds --json lock_waits", gotJSON, wantJSON)
	if !strings.Contains(stdout, `"lock_waits": []`) {
		t.Errorf("kinds --json: want an empty lock_waits list for mail, printed:\n%s", stdout)
	}
}

func TestJobsListAndShow(t *testing.T) {
	t.Parallel()
	s := setupJobs(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"jobs", "list", "webhook", "--state", "failed"}, `ID  STATE   KEY  ATTEMPTS  CREATED               DUE  DATA
6   failed  8    25/25     2026-01-02T03:04:10Z  -    {"customer_id":8,"url":"https://a.example/6"}
5   failed  7    25/25     2026-01-02T03:04:09Z  -    {"customer_id":7,"url":"https://a.example/5"}
`},
		{[]string{"jobs", "list", "webhook", "--key", "8"}, `ID  STATE    KEY  ATTEMPTS  CREATED               DUE  DATA
7   waiting  8    0/25      2026-01-02T03:04:11Z  -    {"customer_id":8,"url":"https://a.example/7"}
6   failed   8    25/25     2026-01-02T03:04:10Z  -    {"customer_id":8,"url":"https://a.example/6"}
`},
		// A full page says how to get the next one.
		{[]string{"jobs", "list", "webhook", "--limit", "2", "--before", "5"}, `ID  STATE      KEY  ATTEMPTS  CREATED               DUE  DATA
4   processed  7    1/25      2026-01-02T03:04:08Z  -    {"customer_id":7,"url":"https://a.example/4"}
3   running    7    1/25      2026-01-02T03:04:07Z  -    {"customer_id":7,"url":"https://a.example/3"}
more may follow: add --before 3
`},
		{[]string{"jobs", "list", "mail"}, "mail: no jobs match\n"},
	} {
		code, stdout, stderr := jp(t, s, tc.args...)
		check(t, tc.args, code, stdout, stderr, 0, tc.want, "")
	}

	code, stdout, stderr := jp(t, s, "jobs", "show", "webhook", "5")
	want := regexp.MustCompile(`^kind: +webhook
id: +5
state: +failed
key: +7
attempts: +25 of 25
created: +2026-01-02T03:04:09Z
updated: +\S+
due: +on enqueue
started: +\S+
lease expires: +-
lease holder: +-
processed: +-
failed: +\S+Z
last error: +HTTP 500
data:
  \{
    "customer_id": 7,
    "url": "https://a\.example/5"
  \}
$`)
	if code != 0 || stderr != "" || !want.MatchString(stdout) {
		t.Errorf("jobs show webhook 5: exit %d, stderr %q, printed:\n%s", code, stderr, stdout)
	}
	code, stdout, _ = jp(t, s, "jobs", "show", "webhook", "3", "--json")
	var job jobJSON
	if err := json.Unmarshal([]byte(stdout), &job); err != nil || code != 0 {
		t.Fatalf("jobs show --json: exit %d, %q: %v", code, stdout, err)
	}
	var data bytes.Buffer
	if err := json.Compact(&data, job.Data); err != nil {
		t.Fatal(err)
	}
	job.Data = data.Bytes()
	if job.ID != 3 || job.State != "running" || job.Key == nil || *job.Key != "7" || job.LeaseOwner == nil ||
		*job.LeaseOwner != "node-a:1" || job.LockSlot == nil || *job.LockSlot != 0 || job.LeaseExpiresAt == nil ||
		string(job.Data) != `{"customer_id":7,"url":"https://a.example/3"}` {
		t.Errorf("jobs show webhook 3 --json: got %+v (data %s)", job, job.Data)
	}
}

func TestJobsActions(t *testing.T) {
	t.Parallel()
	s := setupJobs(t)
	steps := []struct {
		args []string
		want string
		rows []string
	}{
		{[]string{"jobs", "retry", "webhook", "5", "1", "3", "99", "5"},
			"webhook: job 5 retried: waiting, due now\n" +
				"webhook: job 1 left as it is: already waiting\n" +
				"webhook: job 3 left as it is: running\n" +
				"webhook: job 99 left as it is: no such job\n",
			[]string{initialWebhooks[0], initialWebhooks[1], initialWebhooks[2], initialWebhooks[3],
				"5 waiting attempts=25 due_later=false err=HTTP 500", initialWebhooks[5], initialWebhooks[6]}},
		{[]string{"jobs", "run-now", "webhook", "2", "1"},
			"webhook: job 2 due now\nwebhook: job 1 left as it is: already due\n",
			[]string{initialWebhooks[0], "2 waiting attempts=0 due_later=false err=-", initialWebhooks[2], initialWebhooks[3],
				"5 waiting attempts=25 due_later=false err=HTTP 500", initialWebhooks[5], initialWebhooks[6]}},
		{[]string{"jobs", "discard", "webhook", "1", "2", "3", "--reason", "customer gone"},
			"webhook: jobs 1, 2 discarded: failed\n" +
				"webhook: job 3 left as it is: running: a running job is never discarded; it ends on its own, or is retried when its lease expires\n",
			[]string{"1 failed attempts=0 due_later=false err=discarded by an operator: customer gone",
				"2 failed attempts=0 due_later=false err=discarded by an operator: customer gone", initialWebhooks[2], initialWebhooks[3],
				"5 waiting attempts=25 due_later=false err=HTTP 500", initialWebhooks[5], initialWebhooks[6]}},
	}
	for _, st := range steps {
		code, stdout, stderr := jp(t, s, st.args...)
		check(t, st.args, code, stdout, stderr, 0, st.want, "")
		assertRows(t, "after jobpipe "+strings.Join(st.args, " "), jobRows(t, s, "webhook"), st.rows)
	}

	code, stdout, stderr := jp(t, s, "jobs", "retry", "webhook", "--all-failed", "--progress", "always")
	check(t, nil, code, stdout, stderr, 0, "webhook: 3 failed jobs retried\n",
		"\rretrying webhook [##############################] 100% 3/3\n")
	assertRows(t, "after retry --all-failed", jobRows(t, s, "webhook"), []string{
		"1 waiting attempts=0 due_later=false err=discarded by an operator: customer gone",
		"2 waiting attempts=0 due_later=false err=discarded by an operator: customer gone", initialWebhooks[2], initialWebhooks[3],
		"5 waiting attempts=25 due_later=false err=HTTP 500", "6 waiting attempts=25 due_later=false err=timeout", initialWebhooks[6]})

	code, stdout, _ = jp(t, s, "jobs", "run-now", "webhook", "3", "--json")
	check(t, nil, code, stdout, "", 0, `{
  "kind": "webhook",
  "action": "run-now",
  "changed": [],
  "skipped": [
    {
      "id": 3,
      "reason": "running"
    }
  ]
}
`, "")
}

func TestEnqueueCommand(t *testing.T) {
	t.Parallel()
	s := setupJobs(t)
	steps := []struct {
		args []string
		want string
		rows []string
	}{
		{[]string{"enqueue", "mail", "--data", `{"address": "a@example.com", "body": {"n": 1}}`},
			"mail: job 1 enqueued\n", []string{`1 a@example.com {"n": 1} later=false`}},
		{[]string{"enqueue", "mail", "--data", `{"address": "a@example.com", "body": {"n": 2}}`},
			"mail: job 1 is already waiting with the same unique fields: nothing added\n", []string{`1 a@example.com {"n": 1} later=false`}},
		{[]string{"enqueue", "mail", "--data", `{"address": "a@example.com", "body": {"n": 3}}`, "--on-duplicate", "replace", "--in", "1h"},
			"mail: job 1 was waiting with the same unique fields: replaced its data and due time\n", []string{`1 a@example.com {"n": 3} later=true`}},
		{[]string{"enqueue", "mail", "--json", "--at", "2020-01-01T00:00:00Z", "--data", `{"address": "b@example.com", "body": []}`},
			"{\n  \"kind\": \"mail\",\n  \"id\": 4,\n  \"duplicate\": false,\n  \"replaced\": false\n}\n",
			[]string{`1 a@example.com {"n": 3} later=true`, `4 b@example.com [] later=false`}},
	}
	for _, st := range steps {
		code, stdout, stderr := jp(t, s, st.args...)
		check(t, st.args, code, stdout, stderr, 0, st.want, "")
		assertRows(t, "after jobpipe "+strings.Join(st.args, " "), mailRows(t, s), st.rows)
	}
}

func mailRows(t *testing.T, s *testenv.Schema) []string {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(),
		`SELECT format('%s %s %s later=%s', id, address, body, coalesce(process_after > now(), false)::text) FROM mail ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Bad command lines and bad values are refused with a message that says what to do, and nothing is
// written.
func TestOperationsBadInput(t *testing.T) {
	t.Parallel()
	s := setupJobs(t)
	usageOf := func(name string) string { return "\n\n" + commands[name].usage }
	for _, tc := range []struct {
		args       []string
		wantCode   int
		wantStderr string
	}{
		{[]string{"kinds", "extra"}, 2, "jobpipe kinds: unexpected argument \"extra\": kinds takes none" + usageOf("kinds")},
		{[]string{"kinds", "--bogus"}, 2, "jobpipe kinds: flag provided but not defined: -bogus" + usageOf("kinds")},
		{[]string{"jobs", "drop", "webhook"}, 2, "jobpipe jobs: unknown subcommand \"drop\"; want list, show, retry, discard or run-now" + usageOf("jobs")},
		{[]string{"jobs", "list"}, 2, "jobpipe jobs list: want one KIND, got 0 arguments" + usageOf("jobs")},
		{[]string{"jobs", "list", "nosuch"}, 1, "jobpipe jobs list: unknown kind \"nosuch\": " + noSuchKind},
		{[]string{"jobs", "list", "webhook", "--state", "done"}, 2, "jobpipe jobs list: --state: admin: invalid state \"done\": use one of waiting, running, processed, failed" + usageOf("jobs")},
		{[]string{"jobs", "list", "webhook", "--limit", "0"}, 2, "jobpipe jobs list: --limit 0: give 1 to 1000" + usageOf("jobs")},
		{[]string{"jobs", "list", "webhook", "--limit", "01001"}, 2, "jobpipe jobs list: --limit 01001: give 1 to 1000" + usageOf("jobs")},
		{[]string{"jobs", "list", "webhook", "--before", "-01"}, 2, "jobpipe jobs list: --before -01: give a job id (1 or more)" + usageOf("jobs")},
		{[]string{"jobs", "list", "webhook", "--limit", "x"}, 2, "jobpipe jobs list: invalid value \"x\" for flag -limit: parse error" + usageOf("jobs")},
		{[]string{"jobs", "list", "mail", "--key", "1"}, 1, ""},
		{[]string{"jobs", "show", "webhook", "abc"}, 2, "jobpipe jobs show: job id \"abc\" is not a job id: give whole numbers of 1 or more, as `jobpipe jobs list` shows them" + usageOf("jobs")},
		{[]string{"jobs", "show", "webhook", "99"}, 1, ""},
		{[]string{"jobs", "retry", "webhook"}, 2, "jobpipe jobs retry: missing job ids; give one or more, or --all-failed" + usageOf("jobs")},
		{[]string{"jobs", "retry", "webhook", "5", "--all-failed"}, 2, "jobpipe jobs retry: --all-failed retries every failed job: give no ids with it" + usageOf("jobs")},
		{[]string{"jobs", "retry", "webhook", "--all-failed", "--progress", "sometimes"}, 2, "jobpipe jobs retry: --progress \"sometimes\": want auto, always or never" + usageOf("jobs")},
		{[]string{"jobs", "discard", "webhook", "0"}, 2, "jobpipe jobs discard: job id \"0\" is not a job id: give whole numbers of 1 or more, as `jobpipe jobs list` shows them" + usageOf("jobs")},
		{[]string{"jobs", "run-now", "webhook", "-3"}, 2, "jobpipe jobs run-now: flag provided but not defined: -3" + usageOf("jobs")},
		{[]string{"enqueue", "webhook"}, 2, "jobpipe enqueue: missing --data: give the job's data as a JSON object, e.g. --data '{\"id\": 42}'" + usageOf("enqueue")},
		{[]string{"enqueue", "webhook", "--data", `{"customer_id": 1`}, 2, "jobpipe enqueue: the data in --data is not a JSON object (invalid JSON at byte 17: unexpected end of JSON input): write it as {\"column\": value, ...}" + usageOf("enqueue")},
		{[]string{"enqueue", "webhook", "--data", `[1]`}, 2, "jobpipe enqueue: the data in --data is not a JSON object (it is a JSON array): write it as {\"column\": value, ...}" + usageOf("enqueue")},
		{[]string{"enqueue", "webhook", "--data", `{"customer_id": "7", "url": 5, "colour": 1}`}, 1, ""},
		{[]string{"enqueue", "webhook", "--data", `{"customer_id": 1.5, "url": "u"}`}, 1, ""},
		{[]string{"enqueue", "webhook", "--data", `{"url": "u"}`}, 1, ""},
		{[]string{"enqueue", "nosuch", "--data", `{}`}, 1, "jobpipe enqueue: unknown kind \"nosuch\": " + noSuchKind},
		{[]string{"enqueue", "webhook", "--data", `{}`, "--at", "tomorrow"}, 2, "jobpipe enqueue: --at \"tomorrow\" is not an RFC 3339 time: write it as 2026-11-21T18:00:00Z or 2026-11-21T19:00:00+01:00" + usageOf("enqueue")},
		{[]string{"enqueue", "webhook", "--data", `{}`, "--in", "-5m"}, 2, "jobpipe enqueue: --in \"-5m\" is not a duration of 0 or more: write it as 90s, 15m or 2h30m" + usageOf("enqueue")},
		{[]string{"enqueue", "webhook", "--data", `{}`, "--in", "5m", "--at", "2026-01-01T00:00:00Z"}, 2, "jobpipe enqueue: --at and --in contradict each other: give one" + usageOf("enqueue")},
		{[]string{"enqueue", "webhook", "--data", `{}`, "--on-duplicate", "merge"}, 2, "jobpipe enqueue: --on-duplicate \"merge\": want skip, replace or error" + usageOf("enqueue")},
		{[]string{"enqueue", "webhook", "--data", `{}`, "--bogus"}, 2, "jobpipe enqueue: flag provided but not defined: -bogus" + usageOf("enqueue")},
	} {
		code, stdout, stderr := jp(t, s, tc.args...)
		if tc.wantStderr == "" {
			// A failure whose message comes from package admin: checked there word for word; here,
			// that it is a failure, that it names the problem, and that it says nothing on stdout.
			if code != tc.wantCode || stdout != "" || !strings.HasPrefix(stderr, "jobpipe: ") || strings.Count(stderr, "\n") != 1 {
				t.Errorf("jobpipe %q: exit %d, stdout %q, stderr %q; want exit %d and one line on stderr", tc.args, code, stdout, stderr, tc.wantCode)
			}
		} else {
			check(t, tc.args, code, stdout, stderr, tc.wantCode, "", tc.wantStderr)
		}
		assertRows(t, "after jobpipe "+strings.Join(tc.args, " "), jobRows(t, s, "webhook"), initialWebhooks)
		assertRows(t, "mail after jobpipe "+strings.Join(tc.args, " "), mailRows(t, s), nil)
	}
	// The messages of the value errors name the column, its type and the value.
	_, _, stderr := jp(t, s, "enqueue", "webhook", "--data", `{"customer_id": "7", "url": 5, "colour": 1}`)
	for _, want := range []string{`column "colour": not a column of kind "webhook"`, `column "customer_id" (bigint): "7" is a string, not an integer`,
		`column "url" (text): 5 is a number, not a string`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("enqueue with three bad values: stderr %q lacks %q", stderr, want)
		}
	}
}

// noSuchKind ends the message for a kind name near no registered one.
const noSuchKind = "no kind of that name is registered; a dispatcher registers its kinds when it starts, and a migration " +
	"written by `jobpipe kind new` registers its kind when applied (`jobpipe kinds` lists them)\n"

// An unknown kind near a registered one is refused under the command's name, with that kind
// suggested, and nothing changes.
func TestUnknownKindSuggestsTheClosest(t *testing.T) {
	t.Parallel()
	s := setupJobs(t)
	const hint = "? (`jobpipe kinds` lists the registered kinds)\n"
	for _, tc := range []struct {
		args       []string
		wantStderr string
	}{
		{[]string{"jobs", "list", "webhok"}, "jobpipe jobs list: unknown kind \"webhok\": did you mean webhook" + hint},
		{[]string{"jobs", "retry", "Webhook", "1"}, "jobpipe jobs retry: unknown kind \"Webhook\": did you mean webhook" + hint},
		{[]string{"enqueue", "webhooks", "--data", `{"customer_id": 1, "url": "u"}`}, "jobpipe enqueue: unknown kind \"webhooks\": did you mean webhook" + hint},
		{[]string{"limit", "set", "mial", "3"}, "jobpipe limit set: unknown kind \"mial\": did you mean mail" + hint},
		{[]string{"limit", "get", "webhok"}, "jobpipe limit get: unknown kind \"webhok\": did you mean webhook" + hint},
		{[]string{"limit", "list", "mails"}, "jobpipe limit list: unknown kind \"mails\": did you mean mail" + hint},
		{[]string{"pause", "webhook_"}, "jobpipe pause: unknown kind \"webhook_\": did you mean webhook" + hint},
		{[]string{"prune", "mal"}, "jobpipe prune: unknown kind \"mal\": did you mean mail" + hint},
		{[]string{"jobs", "list", "hook"}, "jobpipe jobs list: unknown kind \"hook\": " + noSuchKind},
	} {
		code, stdout, stderr := jp(t, s, tc.args...)
		check(t, tc.args, code, stdout, stderr, 1, "", tc.wantStderr)
	}
	assertRows(t, "after unknown kinds", jobRows(t, s, "webhook"), initialWebhooks)
	assertRows(t, "mail after unknown kinds", mailRows(t, s), nil)
}

// A kind whose table is missing is reported, and the others are still shown.
func TestKindsWithAMissingTable(t *testing.T) {
	t.Parallel()
	s := setupJobs(t)
	if _, err := s.Pool.Exec(context.Background(), `DROP TABLE mail`); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := jp(t, s, "kinds")
	if code != 1 || !regexp.MustCompile(`^KIND .*\nwebhook +3 +2 +1 +1 +2 `).MatchString(stdout) ||
		stderr != "jobpipe: admin: the kind's table is missing: kind \"mail\" has no table \"mail\": apply the migration that creates it (jobpipe migrate up --dir ...)\n"+
			"jobpipe: (looked in "+databaseText(t, s)+", URL from --database-url)\n" {
		t.Errorf("kinds with mail's table dropped: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
