package schedule_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/schedule"
)

const cronHelp = `write 5 fields "minute hour day-of-month month day-of-week" (e.g. "30 3 * * *" for 03:30 every day), ` +
	`6 with seconds first (e.g. "*/10 * * * * *" for every 10 seconds), or a descriptor (e.g. "@daily", "@every 15m")`

func TestScheduleParseNormalises(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   schedule.Spec
		want schedule.Spec
	}{
		{"defaults", schedule.Spec{Name: "nightly", Cron: " 0   3 * * * "},
			schedule.Spec{Name: "nightly", Cron: "0 3 * * *", TimeZone: "UTC", CatchUp: schedule.CatchUpLast, Grace: 30 * time.Second}},
		{"zone field", schedule.Spec{Name: "nightly", Cron: "0 3 * * *", TimeZone: "Europe/Berlin", CatchUp: schedule.CatchUpAll, Grace: time.Minute},
			schedule.Spec{Name: "nightly", Cron: "0 3 * * *", TimeZone: "Europe/Berlin", CatchUp: schedule.CatchUpAll, Grace: time.Minute}},
		{"CRON_TZ prefix", schedule.Spec{Name: "nightly", Cron: "CRON_TZ=Europe/Berlin 0 3 * * *"},
			schedule.Spec{Name: "nightly", Cron: "0 3 * * *", TimeZone: "Europe/Berlin", CatchUp: schedule.CatchUpLast, Grace: 30 * time.Second}},
		{"TZ prefix agreeing with the field", schedule.Spec{Name: "nightly", Cron: "TZ=Asia/Tokyo @daily", TimeZone: "Asia/Tokyo", CatchUp: "None"},
			schedule.Spec{Name: "nightly", Cron: "@daily", TimeZone: "Asia/Tokyo", CatchUp: schedule.CatchUpNone, Grace: 30 * time.Second}},
		{"seconds and every", schedule.Spec{Name: "tick", Cron: "@every 1h30m"},
			schedule.Spec{Name: "tick", Cron: "@every 1h30m", TimeZone: "UTC", CatchUp: schedule.CatchUpLast, Grace: 30 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := schedule.Parse(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Spec(); got != tc.want {
				t.Errorf("Spec() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestScheduleParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		spec schedule.Spec
		want string
	}{
		{"field out of range", schedule.Spec{Name: "nightly", Cron: "61 * * * *"},
			`schedule: invalid cron spec "61 * * * *" of schedule "nightly": end of range (61) above maximum (59): 61; ` + cronHelp},
		{"too few fields", schedule.Spec{Name: "nightly", Cron: "* * *"},
			`schedule: invalid cron spec "* * *" of schedule "nightly": expected 5 to 6 fields, found 3: [* * *]; ` + cronHelp},
		{"empty", schedule.Spec{Name: "nightly"},
			`schedule: invalid cron spec "" of schedule "nightly": it is empty; ` + cronHelp},
		{"never", schedule.Spec{Name: "nightly", Cron: "0 0 30 2 *"},
			`schedule: invalid cron spec "0 0 30 2 *" of schedule "nightly": it matches no time in the next five years (is it a date that does not exist, such as February 30?); ` + cronHelp},
		{"every below a second", schedule.Spec{Name: "tick", Cron: "@every 500ms"},
			`schedule: invalid cron spec "@every 500ms" of schedule "tick": @every 500ms: give whole seconds, at least 1s; ` + cronHelp},
		{"every without duration", schedule.Spec{Name: "tick", Cron: "@every soon"},
			`schedule: invalid cron spec "@every soon" of schedule "tick": @every needs a duration such as 90s or 1h30m: time: invalid duration "soon"; ` + cronHelp},
		{"unknown zone", schedule.Spec{Name: "nightly", Cron: "0 3 * * *", TimeZone: "Europe/Berln"},
			`schedule: invalid time zone "Europe/Berln" of schedule "nightly": unknown: give an IANA name such as "Europe/Berlin" or "America/New_York", or "UTC" (unknown time zone Europe/Berln)`},
		{"local zone", schedule.Spec{Name: "nightly", Cron: "CRON_TZ=Local 0 3 * * *"},
			`schedule: invalid time zone "Local" of schedule "nightly": "Local" is each machine's own setting, so nodes could disagree: give an IANA name such as "Europe/Berlin", or "UTC"`},
		{"zones disagree", schedule.Spec{Name: "nightly", Cron: "CRON_TZ=Europe/Berlin 0 3 * * *", TimeZone: "Europe/Paris"},
			`schedule: invalid time zone of schedule "nightly": the spec says "Europe/Berlin" and TimeZone says "Europe/Paris": give one, or make them agree`},
		{"catch-up", schedule.Spec{Name: "nightly", Cron: "0 3 * * *", CatchUp: "some"},
			`schedule: invalid catch-up policy "some": use none, last or all (schedule "nightly")`},
		{"grace", schedule.Spec{Name: "nightly", Cron: "0 3 * * *", Grace: -time.Second},
			`schedule: invalid grace -1s of schedule "nightly": give a positive duration, or 0 for the default (30s)`},
		{"name", schedule.Spec{Name: "Nightly Report", Cron: "0 3 * * *"},
			`schedule: invalid schedule name: jobinfo: schedule name "Nightly Report" is not allowed: use lower-case letters, digits and underscores, starting with a letter or underscore`},
		{"every problem at once", schedule.Spec{Name: "nightly", Cron: "0 3 * *", TimeZone: "Mars/Olympus", CatchUp: "first"},
			`schedule: invalid time zone "Mars/Olympus" of schedule "nightly": unknown: give an IANA name such as "Europe/Berlin" or "America/New_York", or "UTC" (unknown time zone Mars/Olympus)` + "\n" +
				`schedule: invalid cron spec "0 3 * *" of schedule "nightly": expected 5 to 6 fields, found 4: [0 3 * *]; ` + cronHelp + "\n" +
				`schedule: invalid catch-up policy "first": use none, last or all (schedule "nightly")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := schedule.Parse(tc.spec)
			if !errors.Is(err, schedule.ErrInvalid) || err.Error() != tc.want {
				t.Errorf("Parse error:\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestScheduleParseCatchUp(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]schedule.CatchUp{"": "last", "last": "last", "NONE": "none", " all ": "all"} {
		if got, err := schedule.ParseCatchUp(in); err != nil || got != want {
			t.Errorf("ParseCatchUp(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
