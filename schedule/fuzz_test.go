package schedule_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/schedule"
)

// FuzzParse feeds Parse arbitrary specs. A spec it refuses gets one error per problem, each wrapping
// ErrInvalid and naming the value it is about. A spec it accepts is normalised for good: parsing its
// Spec() and its String() again gives the same schedule, and its next instant after now exists, lies
// after now, and is followed by a later one.
func FuzzParse(f *testing.F) {
	for _, seed := range []struct {
		name, cron, zone, catchUp string
		grace                     int64
	}{
		{"nightly", "0 3 * * *", "", "", 0},
		{"tick", "*/10 * * * * *", "", "all", 5},
		{"daily", "@daily", "Asia/Tokyo", "none", 0},
		{"every", "@every 1h30m", "", "last", 60},
		{"berlin", "CRON_TZ=Europe/Berlin 30 2 * * *", "", "", 0},
		{"agree", "TZ=Asia/Tokyo @daily", "Asia/Tokyo", "None", 0},
		{"twice", "TZ=UTC CRON_TZ=Asia/Tokyo 0 3 * * *", "", "", 0},
		{"empty_second_zone", "TZ=UTC CRON_TZ=UTC", "", "", 0},
		{"range", "0 9-17/2 * * mon-fri", "America/New_York", "", 0},
		{"never", "0 0 30 2 *", "", "", 0},
		{"bad", "61 * * * *", "", "", 0},
		{"short", "@every 500ms", "", "", 0},
		{"local", "@hourly", "Local", "", 0},
		{"path", "@hourly", "../../etc/passwd", "", 0},
		{"Bad Name", "* * *", "Mars/Olympus", "sometimes", -1},
	} {
		f.Add(seed.name, seed.cron, seed.zone, seed.catchUp, seed.grace)
	}
	now := time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC) // hours before Europe's clocks spring forward
	f.Fuzz(func(t *testing.T, name, cron, zone, catchUp string, graceSeconds int64) {
		spec := schedule.Spec{Name: name, Cron: cron, TimeZone: zone, CatchUp: schedule.CatchUp(catchUp),
			Grace: time.Duration(graceSeconds) * time.Second}
		s, err := schedule.Parse(spec)
		if err != nil {
			checkParseError(t, spec, err)
			return
		}
		norm := s.Spec()
		again, err := schedule.Parse(norm)
		if err != nil {
			t.Fatalf("Parse(%+v) = %+v, whose Spec() does not parse again: %v", spec, norm, err)
		}
		if again.Spec() != norm || again.String() != s.String() {
			t.Fatalf("Parse(%+v).Spec() = %+v, parsed again: %+v", spec, norm, again.Spec())
		}
		fromString, err := schedule.Parse(schedule.Spec{Name: name, Cron: s.String(), CatchUp: norm.CatchUp, Grace: norm.Grace})
		if err != nil || fromString.Spec() != norm {
			t.Fatalf("Parse(%+v).String() = %q, which parses as %+v, %v; want %+v", spec, s.String(), specOf(fromString), err, norm)
		}
		next := s.Next(now)
		if next.IsZero() || !next.After(now) {
			t.Fatalf("%s: Next(%v) = %v; want an instant after it", s, now, next)
		}
		if next.Location() != s.Location() {
			t.Fatalf("%s: Next(%v) = %v, not in the schedule's zone %v", s, now, next, s.Location())
		}
		if after := s.Next(next); !after.IsZero() && !after.After(next) {
			t.Fatalf("%s: Next(%v) = %v; want a later instant", s, next, after)
		}
	})
}

// checkParseError checks that each of err's problems wraps ErrInvalid and names the value it is
// about: the name, cron expression, zone, catch-up policy or grace of spec.
func checkParseError(t *testing.T, spec schedule.Spec, err error) {
	t.Helper()
	problems := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		problems = j.Unwrap()
	}
	names := []string{fmt.Sprintf("%q", spec.Name), fmt.Sprintf("%q", spec.Cron), fmt.Sprintf("%q", spec.TimeZone),
		fmt.Sprintf("%q", string(spec.CatchUp)), spec.Grace.String()}
	// An empty name has no value to quote; its problem names it by saying so.
	if spec.Name == "" {
		names = append(names, "schedule name is empty")
	}
	// A zone given by a CRON_TZ= or TZ= prefix is named on its own.
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if after, ok := strings.CutPrefix(strings.TrimSpace(spec.Cron), prefix); ok {
			zone, _, _ := strings.Cut(after, " ")
			names = append(names, fmt.Sprintf("%q", zone))
			break
		}
	}
	for _, p := range problems {
		if !errors.Is(p, schedule.ErrInvalid) {
			t.Fatalf("Parse(%+v): problem %q does not wrap ErrInvalid", spec, p)
		}
		msg := p.Error()
		if !strings.HasPrefix(msg, "schedule: invalid ") {
			t.Fatalf("Parse(%+v): problem %q does not start with %q", spec, msg, "schedule: invalid ")
		}
		if !containsAny(msg, names) {
			t.Fatalf("Parse(%+v): problem %q names none of the spec's values", spec, msg)
		}
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func specOf(s *schedule.Schedule) any {
	if s == nil {
		return nil
	}
	return s.Spec()
}
