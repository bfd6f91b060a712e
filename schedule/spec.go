package schedule

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// CatchUp says what a schedule does with instants it missed: instants more than its grace in the past
// when its leader gets to them, because no dispatcher ran it then (all were stopped, or the schedule
// was added later than some instants of its next_run_at).
type CatchUp string

// The catch-up policies. Instants within the grace always fire; the policy decides only about older ones.
const (
	// CatchUpLast fires the latest missed instant and skips the older ones: a job that was due runs
	// once, however long the outage. The default.
	CatchUpLast CatchUp = "last"
	// CatchUpNone skips every missed instant.
	CatchUpNone CatchUp = "none"
	// CatchUpAll fires every missed instant, at most MaxPerRound in one transaction; the leader
	// continues with the rest at once.
	CatchUpAll CatchUp = "all"
)

// ParseCatchUp reads a catch-up policy by name: none, last or all ("" is last).
func ParseCatchUp(s string) (CatchUp, error) {
	switch c := CatchUp(strings.ToLower(strings.TrimSpace(s))); c {
	case "":
		return CatchUpLast, nil
	case CatchUpLast, CatchUpNone, CatchUpAll:
		return c, nil
	}
	return "", fmt.Errorf("%w catch-up policy %q: use none, last or all", ErrInvalid, s)
}

// Defaults of a Spec.
const (
	// DefaultGrace is how late an instant may fire and still count as on time. It covers a change of
	// leader after a crash with the dispatcher's default timings (the lease of 15 s runs out, and the
	// next node takes it within 5 s), so that a failover alone never makes an instant "missed".
	DefaultGrace = 30 * time.Second
	// DefaultTimeZone is the zone of a spec that names none: the same on every machine, whatever
	// its local setting.
	DefaultTimeZone = "UTC"
)

// Spec defines a recurring job's timing. Parse checks it.
type Spec struct {
	// Name names the schedule: lower-case letters, digits and underscores, as kind names. It is the
	// schedule's key in jobpipe_schedules; each name is one schedule, whatever node registers it.
	Name string
	// Cron is the cron expression: 5 fields (minute hour day-of-month month day-of-week), or 6 with
	// seconds first, or a descriptor (@yearly, @monthly, @weekly, @daily, @hourly, @every 90s). A
	// "CRON_TZ=Europe/Berlin " or "TZ=Europe/Berlin " prefix gives its zone.
	Cron string
	// TimeZone is the IANA zone the fields are read in, such as "Europe/Berlin". Default UTC, or the
	// zone of a CRON_TZ= prefix (if both are given they must agree).
	TimeZone string
	// CatchUp is what happens to missed instants. Default CatchUpLast.
	CatchUp CatchUp
	// Grace is how late an instant may fire and still count as on time, not missed. Default
	// DefaultGrace.
	Grace time.Duration
}

// Schedule is a parsed Spec: it gives the instants at which its job is due.
type Schedule struct {
	spec  Spec // normalised: Cron without zone prefix and with single spaces, every default filled in
	loc   *time.Location
	sched cron.Schedule
}

// parser reads the fields robfig/cron's standard parser reads, with an optional seconds field first.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cronHelp is what an error about a cron expression suggests.
const cronHelp = `write 5 fields "minute hour day-of-month month day-of-week" (e.g. "30 3 * * *" for 03:30 every day), ` +
	`6 with seconds first (e.g. "*/10 * * * * *" for every 10 seconds), or a descriptor (e.g. "@daily", "@every 15m")`

// Parse checks s and returns its Schedule, or one error listing every problem (each wraps
// ErrInvalid).
func Parse(s Spec) (*Schedule, error) {
	var errs []error
	if err := jobinfo.ValidateName("schedule", s.Name); err != nil {
		errs = append(errs, fmt.Errorf("%w schedule name: %w", ErrInvalid, err))
	}
	prefixZone, expr, hasPrefix := splitZone(s.Cron)
	zone := s.TimeZone
	if hasPrefix {
		if zone != "" && zone != prefixZone {
			errs = append(errs, fmt.Errorf("%w time zone of schedule %q: the spec says %q and TimeZone says %q: give one, or make them agree",
				ErrInvalid, s.Name, prefixZone, zone))
		}
		zone = prefixZone
	}
	zone = cmp.Or(zone, DefaultTimeZone)
	loc, err := loadZone(zone)
	if err != nil {
		errs = append(errs, fmt.Errorf("%w time zone %q of schedule %q: %s", ErrInvalid, zone, s.Name, err))
		loc = time.UTC
	}
	sched, err := parseExpr(expr, loc)
	if err != nil {
		errs = append(errs, fmt.Errorf("%w cron spec %q of schedule %q: %s; %s", ErrInvalid, s.Cron, s.Name, err, cronHelp))
	}
	catchUp, err := ParseCatchUp(string(s.CatchUp))
	if err != nil {
		errs = append(errs, fmt.Errorf("%w (schedule %q)", err, s.Name))
	}
	if s.Grace < 0 {
		errs = append(errs, fmt.Errorf("%w grace %v of schedule %q: give a positive duration, or 0 for the default (%v)",
			ErrInvalid, s.Grace, s.Name, DefaultGrace))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Schedule{
		spec: Spec{Name: s.Name, Cron: expr, TimeZone: zone, CatchUp: catchUp, Grace: cmp.Or(s.Grace, DefaultGrace)},
		loc:  loc, sched: sched,
	}, nil
}

// MustParse is Parse that panics on error, for package-level schedules.
func MustParse(s Spec) *Schedule {
	sched, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return sched
}

// Spec returns the schedule's spec as stored: Cron without a zone prefix and with single spaces,
// TimeZone, CatchUp and Grace filled in.
func (s *Schedule) Spec() Spec { return s.spec }

// Location returns the zone the schedule's fields are read in.
func (s *Schedule) Location() *time.Location { return s.loc }

// String returns the spec with its zone, as robfig/cron would read it: "CRON_TZ=UTC 0 3 * * *".
func (s *Schedule) String() string { return "CRON_TZ=" + s.spec.TimeZone + " " + s.spec.Cron }

// splitZone takes a CRON_TZ= or TZ= prefix off expr.
func splitZone(expr string) (zone, rest string, ok bool) {
	expr = strings.TrimSpace(expr)
	for _, p := range []string{"CRON_TZ=", "TZ="} {
		if after, found := strings.CutPrefix(expr, p); found {
			zone, rest, _ = strings.Cut(after, " ")
			return zone, strings.Join(strings.Fields(rest), " "), true
		}
	}
	return "", strings.Join(strings.Fields(expr), " "), false
}

func loadZone(zone string) (*time.Location, error) {
	if strings.EqualFold(zone, "Local") {
		return nil, errors.New(`"Local" is each machine's own setting, so nodes could disagree: give an IANA name such as "Europe/Berlin", or "UTC"`)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, fmt.Errorf(`unknown: give an IANA name such as "Europe/Berlin" or "America/New_York", or "UTC" (%v)`, err)
	}
	return loc, nil
}

// parseExpr parses a cron expression without zone prefix into a schedule in loc, and checks that it
// ever fires.
func parseExpr(expr string, loc *time.Location) (cron.Schedule, error) {
	if expr == "" {
		return nil, errors.New("it is empty")
	}
	// A second zone prefix would reach robfig/cron, whose zone Parse then overrides (so the stored
	// spec would not parse again), and which panics on a prefix with nothing after it.
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, errors.New("it gives a time zone twice: give one CRON_TZ= prefix, or the zone alone")
	}
	var sched cron.Schedule
	if d, ok := strings.CutPrefix(expr, "@every "); ok {
		e, err := parseEvery(d, loc)
		if err != nil {
			return nil, err
		}
		sched = e
	} else {
		parsed, err := parser.Parse(expr)
		if err != nil {
			return nil, err
		}
		spec, ok := parsed.(*cron.SpecSchedule)
		if !ok {
			return nil, fmt.Errorf("unexpected schedule type %T", parsed)
		}
		spec.Location = loc
		sched = spec
		if spec.Hour&allHours != allHours {
			sched = wallClock{spec}
		}
	}
	if next := sched.Next(time.Now()); next.IsZero() {
		return nil, errors.New("it matches no time in the next five years (is it a date that does not exist, such as February 30?)")
	}
	return sched, nil
}

func parseEvery(d string, loc *time.Location) (every, error) {
	delay, err := time.ParseDuration(strings.TrimSpace(d))
	switch {
	case err != nil:
		return every{}, fmt.Errorf("@every needs a duration such as 90s or 1h30m: %v", err)
	case delay < time.Second || delay%time.Second != 0:
		return every{}, fmt.Errorf("@every %v: give whole seconds, at least 1s", delay)
	}
	return every{delay: delay, loc: loc}, nil
}
