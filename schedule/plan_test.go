package schedule_test

import (
	"slices"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/schedule"
)

func fmtTimes(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.UTC().Format(time.RFC3339)
	}
	return out
}

// seconds returns the instants base+from s .. base+to s.
func secs(base time.Time, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, base.Add(time.Duration(i)*time.Second).Format(time.RFC3339))
	}
	return out
}

func TestSchedulePlanCatchUp(t *testing.T) {
	t.Parallel()
	t0 := utc("2024-05-01T12:00:00Z")
	everySecond := func(c schedule.CatchUp) *schedule.Schedule {
		return schedule.MustParse(schedule.Spec{Name: "tick", Cron: "* * * * * *", CatchUp: c, Grace: 3 * time.Second})
	}
	daily := func(c schedule.CatchUp) *schedule.Schedule {
		return schedule.MustParse(schedule.Spec{Name: "nightly", Cron: "0 3 * * *", TimeZone: "Europe/Berlin", CatchUp: c})
	}
	for _, tc := range []struct {
		name      string
		s         *schedule.Schedule
		next, now time.Time
		max       int
		fire      []string
		skipped   int
		wantNext  time.Time
	}{
		// now is 10.5 s past next; with a grace of 3 s, instants before t0+7.5s are missed.
		{"all fires every missed instant", everySecond(schedule.CatchUpAll), t0, t0.Add(10500 * time.Millisecond), 0,
			secs(t0, 0, 10), 0, t0.Add(11 * time.Second)},
		{"none fires those within the grace", everySecond(schedule.CatchUpNone), t0, t0.Add(10500 * time.Millisecond), 0,
			secs(t0, 8, 10), 8, t0.Add(11 * time.Second)},
		{"last fires the latest missed and those within the grace", everySecond(schedule.CatchUpLast), t0, t0.Add(10500 * time.Millisecond), 0,
			secs(t0, 7, 10), 7, t0.Add(11 * time.Second)},
		{"on time", everySecond(schedule.CatchUpNone), t0, t0.Add(20 * time.Millisecond), 0,
			secs(t0, 0, 0), 0, t0.Add(time.Second)},
		{"not due yet", everySecond(schedule.CatchUpAll), t0, t0.Add(-300 * time.Millisecond), 0,
			nil, 0, t0},
		// next_run_at need not be an instant (a bound persisted when a spec matches nothing for
		// years): the first instant at or after it counts.
		{"next between instants", everySecond(schedule.CatchUpAll), t0.Add(-400 * time.Millisecond), t0.Add(1500 * time.Millisecond), 0,
			secs(t0, 0, 1), 0, t0.Add(2 * time.Second)},
		{"a round is bounded", everySecond(schedule.CatchUpAll), t0, t0.Add(time.Hour), 5,
			secs(t0, 0, 4), 0, t0.Add(5 * time.Second)},
		{"bounded under last too", everySecond(schedule.CatchUpLast), t0, t0.Add(10500 * time.Millisecond), 2,
			secs(t0, 7, 8), 7, t0.Add(9 * time.Second)},
		// Nobody ran the daily job from 05-01 to 05-04 10:00 (03:00 CEST is 01:00Z).
		{"daily, all", daily(schedule.CatchUpAll), utc("2024-05-01T01:00:00Z"), utc("2024-05-04T10:00:00Z"), 0,
			[]string{"2024-05-01T01:00:00Z", "2024-05-02T01:00:00Z", "2024-05-03T01:00:00Z", "2024-05-04T01:00:00Z"}, 0, utc("2024-05-05T01:00:00Z")},
		{"daily, last", daily(schedule.CatchUpLast), utc("2024-05-01T01:00:00Z"), utc("2024-05-04T10:00:00Z"), 0,
			[]string{"2024-05-04T01:00:00Z"}, 3, utc("2024-05-05T01:00:00Z")},
		{"daily, none", daily(schedule.CatchUpNone), utc("2024-05-01T01:00:00Z"), utc("2024-05-04T10:00:00Z"), 0,
			nil, 4, utc("2024-05-05T01:00:00Z")},
		// Across the spring-forward change, the day's 03:00 is still once a day.
		{"daily across daylight saving", daily(schedule.CatchUpAll), utc("2024-03-30T02:00:00Z"), utc("2024-04-01T12:00:00Z"), 0,
			[]string{"2024-03-30T02:00:00Z", "2024-03-31T01:00:00Z", "2024-04-01T01:00:00Z"}, 0, utc("2024-04-02T01:00:00Z")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := tc.s.Plan(tc.next, tc.now, tc.max)
			if got := fmtTimes(p.Fire); !slices.Equal(got, tc.fire) || p.Skipped != tc.skipped || p.SkippedAtLeast || !p.Next.Equal(tc.wantNext) {
				t.Errorf("Plan = fire %v, skipped %d (at least: %v), next %s\nwant fire %v, skipped %d, next %s",
					got, p.Skipped, p.SkippedAtLeast, p.Next.UTC().Format(time.RFC3339), tc.fire, tc.skipped, tc.wantNext.Format(time.RFC3339))
			}
			if more := p.More(tc.now); more != (tc.max > 0 && len(tc.fire) == tc.max) {
				t.Errorf("More = %v", more)
			}
		})
	}
}

// An every-second schedule stopped for two days has too many missed instants to walk: they are
// counted up to a bound, and the latest one is still found.
func TestSchedulePlanLongOutage(t *testing.T) {
	t.Parallel()
	t0 := utc("2024-05-01T12:00:00Z")
	now := t0.Add(48 * time.Hour).Add(500 * time.Millisecond)
	for _, tc := range []struct {
		c    schedule.CatchUp
		fire []string
	}{
		{schedule.CatchUpNone, secs(now.Truncate(time.Second), -2, 0)},
		{schedule.CatchUpLast, secs(now.Truncate(time.Second), -3, 0)},
	} {
		s := schedule.MustParse(schedule.Spec{Name: "tick", Cron: "* * * * * *", CatchUp: tc.c, Grace: 3 * time.Second})
		p := s.Plan(t0, now, 0)
		if got := fmtTimes(p.Fire); !slices.Equal(got, tc.fire) || p.Skipped != 100_000 || !p.SkippedAtLeast ||
			!p.Next.Equal(now.Truncate(time.Second).Add(time.Second)) {
			t.Errorf("%s: fire %v, skipped %d (at least %v), next %s; want fire %v, skipped at least 100000",
				tc.c, got, p.Skipped, p.SkippedAtLeast, p.Next.Format(time.RFC3339), tc.fire)
		}
	}
}
