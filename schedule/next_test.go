package schedule_test

import (
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/schedule"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// nextN returns the n instants after from, in UTC.
func nextN(s *schedule.Schedule, from time.Time, n int) []string {
	var out []string
	for range n {
		from = s.Next(from)
		out = append(out, from.UTC().Format(time.RFC3339))
	}
	return out
}

// Europe/Berlin springs forward on 2024-03-31 at 02:00 CET (01:00Z) to 03:00 CEST, and falls back on
// 2024-10-27 at 03:00 CEST (01:00Z) to 02:00 CET.
func TestScheduleNextAcrossDaylightSaving(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, cron, from string
		want             []string
	}{
		// 02:30 does not exist on 03-31: it runs at the change, 03:00 CEST.
		{"daily in the skipped hour", "30 2 * * *", "2024-03-29T12:00:00Z",
			[]string{"2024-03-30T01:30:00Z", "2024-03-31T01:00:00Z", "2024-04-01T00:30:00Z"}},
		// Every time in the skipped hour collapses into one run at the change.
		{"several in the skipped hour", "*/30 2 * * *", "2024-03-30T12:00:00Z",
			[]string{"2024-03-31T01:00:00Z", "2024-04-01T00:00:00Z", "2024-04-01T00:30:00Z"}},
		// 03:00 exists on 03-31 and is not in the gap: one run, as every day.
		{"daily just after the skipped hour", "0 3 * * *", "2024-03-30T12:00:00Z",
			[]string{"2024-03-31T01:00:00Z", "2024-04-01T01:00:00Z"}},
		// 02:30 occurs twice on 10-27 (CEST, then CET): it runs once, at the first.
		{"daily in the repeated hour", "30 2 * * *", "2024-10-25T12:00:00Z",
			[]string{"2024-10-26T00:30:00Z", "2024-10-27T00:30:00Z", "2024-10-28T01:30:00Z"}},
		// Hourly follows the real hours: both 02:00s on 10-27, and no 02:00 on 03-31.
		{"hourly when the clocks fall back", "0 * * * *", "2024-10-26T22:30:00Z",
			[]string{"2024-10-26T23:00:00Z", "2024-10-27T00:00:00Z", "2024-10-27T01:00:00Z", "2024-10-27T02:00:00Z"}},
		{"hourly when the clocks spring forward", "0 * * * *", "2024-03-30T23:30:00Z",
			[]string{"2024-03-31T00:00:00Z", "2024-03-31T01:00:00Z", "2024-03-31T02:00:00Z"}},
		{"every second across the change", "* * * * * *", "2024-03-31T00:59:58Z",
			[]string{"2024-03-31T00:59:59Z", "2024-03-31T01:00:00Z", "2024-03-31T01:00:01Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := schedule.MustParse(schedule.Spec{Name: "dst", Cron: tc.cron, TimeZone: "Europe/Berlin"})
			got := nextN(s, utc(tc.from), len(tc.want))
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("instants after %s:\n got %v\nwant %v", tc.from, got, tc.want)
				}
			}
		})
	}
}

// @every counts from the Unix epoch, so every node and every restart sees the same instants.
func TestScheduleEveryIsAnchored(t *testing.T) {
	t.Parallel()
	s := schedule.MustParse(schedule.Spec{Name: "tick", Cron: "@every 90s"})
	got := nextN(s, utc("2024-01-01T00:00:00Z").Add(time.Millisecond), 3)
	want := []string{"2024-01-01T00:01:30Z", "2024-01-01T00:03:00Z", "2024-01-01T00:04:30Z"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// Zones apply to the fields, whether given as a prefix or a field.
func TestScheduleZones(t *testing.T) {
	t.Parallel()
	from := utc("2024-06-01T12:00:00Z")
	for cron, want := range map[string]string{
		"0 3 * * *":                          "2024-06-02T03:00:00Z",
		"CRON_TZ=America/New_York 0 3 * * *": "2024-06-02T07:00:00Z",
		"TZ=Asia/Tokyo 0 3 * * *":            "2024-06-01T18:00:00Z",
		"CRON_TZ=Europe/Berlin 15 3 4 * * *": "2024-06-02T02:03:15Z",
	} {
		if got := schedule.MustParse(schedule.Spec{Name: "z", Cron: cron}).Next(from).UTC().Format(time.RFC3339); got != want {
			t.Errorf("%q: next after %s = %s, want %s", cron, from.Format(time.RFC3339), got, want)
		}
	}
}
