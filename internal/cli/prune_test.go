package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/jobpipe/jobpipe/schedule"
)

func TestPruneCommand(t *testing.T) {
	t.Parallel()
	s := setupJobs(t)
	ctx := context.Background()
	// Job 4 processed 2 days ago and job 5 failed 8 days ago are past the default retention; job 6
	// failed just now is not.
	if _, err := s.Pool.Exec(ctx, `UPDATE webhook SET processed_at = now() - interval '2 days' WHERE id = 4;
UPDATE webhook SET failed_at = now() - interval '8 days' WHERE id = 5`); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := jp(t, s, "prune", "webhook", "--progress", "always", "--batch", "2")
	check(t, nil, code, stdout, "", 0, "webhook: deleted 1 processed and 1 failed jobs\n", "")
	// Batches of 2 over ids 1..7: the bar moves by id and ends full.
	if !regexp.MustCompile(`^(\rpruning webhook \[[#.]{30}\] +\d+% \d/7)+\rpruning webhook \[#{30}\] 100% 7/7\n$`).MatchString(stderr) {
		t.Errorf("prune --progress always: stderr %q", stderr)
	}
	assertRows(t, "after prune webhook", jobRows(t, s, "webhook"), []string{initialWebhooks[0], initialWebhooks[1], initialWebhooks[2],
		initialWebhooks[5], initialWebhooks[6]})

	// --state keeps the other state whatever its age; waiting and running jobs are never deleted.
	code, stdout, _ = jp(t, s, "prune", "--older-than", "1ms", "--state", "processed", "--json")
	check(t, nil, code, stdout, "", 0, `[
  {
    "kind": "mail",
    "processed": 0,
    "failed": 0
  },
  {
    "kind": "webhook",
    "processed": 0,
    "failed": 0
  }
]
`, "")
	code, stdout, _ = jp(t, s, "prune", "--older-than", "1ms")
	check(t, nil, code, stdout, "", 0, "mail: deleted 0 processed and 0 failed jobs\nwebhook: deleted 0 processed and 1 failed job\n", "")
	assertRows(t, "after prune --older-than 1ms", jobRows(t, s, "webhook"), []string{initialWebhooks[0], initialWebhooks[1], initialWebhooks[2], initialWebhooks[6]})

	usage := "\n\n" + pruneUsage
	for _, tc := range []struct {
		args       []string
		wantCode   int
		wantStderr string
	}{
		{[]string{"prune", "--older-than", "yesterday"}, 2, "jobpipe prune: --older-than \"yesterday\" is not a positive duration: write it as 90m, 48h or 720h" + usage},
		{[]string{"prune", "--older-than", "0s"}, 2, "jobpipe prune: --older-than \"0s\" is not a positive duration: write it as 90m, 48h or 720h" + usage},
		{[]string{"prune", "--state", "waiting"}, 2, "jobpipe prune: --state \"waiting\": want processed, failed or all" + usage},
		{[]string{"prune", "--batch", "0"}, 2, "jobpipe prune: --batch 0: give 1 to 100000" + usage},
		{[]string{"prune", "--batch", "0100001"}, 2, "jobpipe prune: --batch 0100001: give 1 to 100000" + usage},
		{[]string{"prune", "--batch", "0x10"}, 2, "jobpipe prune: invalid value \"0x10\" for flag -batch: parse error" + usage},
		{[]string{"prune", "webhook", "mail"}, 2, "jobpipe prune: unexpected argument \"mail\"; give at most one KIND" + usage},
		{[]string{"prune", "--force"}, 2, "jobpipe prune: flag provided but not defined: -force" + usage},
		{[]string{"prune", "nosuch"}, 1, "jobpipe prune: unknown kind \"nosuch\": " + noSuchKind},
	} {
		code, stdout, stderr := jp(t, s, tc.args...)
		check(t, tc.args, code, stdout, stderr, tc.wantCode, "", tc.wantStderr)
	}
	assertRows(t, "after refused prunes", jobRows(t, s, "webhook"), []string{initialWebhooks[0], initialWebhooks[1], initialWebhooks[2], initialWebhooks[6]})
}

func TestCronList(t *testing.T) {
	t.Parallel()
	s := setupJobs(t)
	ctx := context.Background()
	code, stdout, _ := jp(t, s, "cron", "list")
	check(t, nil, code, stdout, "", 0, "no schedules: a dispatcher stores its schedules (dispatcher.AddSchedule) when it starts\n", "")

	nightly := schedule.MustParse(schedule.Spec{Name: "nightly_ping", Cron: "30 3 * * *", TimeZone: "Europe/Berlin", CatchUp: schedule.CatchUpAll})
	if _, err := schedule.Save(ctx, s.Pool, "webhook", nightly, json.RawMessage(`{"customer_id": 1, "url": "https://a.example/ping"}`)); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = jp(t, s, "cron", "list")
	want := regexp.MustCompile(`^NAME +KIND +CRON +ZONE +CATCH-UP +NEXT RUN +LAST RUN +LAST JOB
nightly_ping +webhook +30 3 \* \* \* +Europe/Berlin +all +20\d\d-\d\d-\d\dT0[12]:30:00Z +- +-
$`)
	if code != 0 || !want.MatchString(stdout) {
		t.Errorf("cron list: exit %d, printed:\n%s", code, stdout)
	}
	code, stdout, _ = jp(t, s, "cron", "list", "--json")
	var got []cronJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != 0 {
		t.Fatalf("cron list --json: exit %d, %q: %v", code, stdout, err)
	}
	if len(got) != 1 || got[0].Name != "nightly_ping" || got[0].Kind != "webhook" || got[0].Cron != "30 3 * * *" ||
		got[0].TimeZone != "Europe/Berlin" || got[0].CatchUp != "all" || got[0].LastRunAt != nil || got[0].LastJobID != nil ||
		!strings.Contains(string(got[0].Data), `"https://a.example/ping"`) {
		t.Errorf("cron list --json: got %+v", got)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cron"}, "jobpipe cron: missing subcommand; want list\n\n" + cronUsage},
		{[]string{"cron", "show"}, "jobpipe cron: unknown subcommand \"show\"; want list\n\n" + cronUsage},
		{[]string{"cron", "list", "x"}, "jobpipe cron list: unexpected argument \"x\": cron list takes none\n\n" + cronUsage},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		check(t, tc.args, code, stdout, stderr, 2, "", tc.want)
	}
}
