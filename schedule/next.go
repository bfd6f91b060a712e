package schedule

import (
	"time"

	"github.com/robfig/cron/v3"
)

// allHours is the hour field of a spec that runs in every hour of the day.
const allHours = 1<<24 - 1

// maxTransitions bounds the zone changes one Next call looks at (two a year in most zones).
const maxTransitions = 64

// wallClock is a spec that names its hours ("30 2 * * *"), read as the classic cron daemon reads it
// across daylight-saving changes. robfig/cron alone skips a time in the hour the clocks spring over,
// so a daily 02:30 job in Europe/Berlin would not run that day, and runs twice on the day they fall
// back. Here a time that does not exist runs at the change itself (once, however many of its times
// fall in the gap), and a time that occurs twice runs at its first occurrence only. A spec that runs
// every hour is not wrapped: it follows the real hours, both of the repeated one and none of the
// skipped one.
type wallClock struct {
	spec *cron.SpecSchedule
}

// Next returns the first instant after t.
func (w wallClock) Next(t time.Time) time.Time {
	for range maxTransitions {
		n := w.spec.Next(t)
		if n.IsZero() {
			return n
		}
		if g, ok := w.gap(t, n); ok {
			return g
		}
		if !w.repeated(n) {
			return n
		}
		t = n
	}
	return time.Time{}
}

// gap returns the first spring-forward change in (t, n] whose skipped wall times include one of the
// spec's.
func (w wallClock) gap(t, n time.Time) (time.Time, bool) {
	loc := w.spec.Location
	p := t
	for range maxTransitions {
		_, end := p.In(loc).ZoneBounds()
		if end.IsZero() || end.After(n) {
			return time.Time{}, false
		}
		_, before := end.Add(-time.Second).In(loc).Zone()
		_, after := end.In(loc).Zone()
		if after > before {
			// The wall times from the change on, read at the old offset, are the skipped ones for
			// (after - before) seconds.
			old := *w.spec
			old.Location = time.FixedZone("", before)
			if m := old.Next(end.Add(-time.Nanosecond)); !m.IsZero() && m.Before(end.Add(time.Duration(after-before)*time.Second)) {
				return end, true
			}
		}
		p = end
	}
	return time.Time{}, false
}

// repeated reports whether n's wall time already occurred, before the clocks fell back: n lies within
// the amount they fell back of the change.
func (w wallClock) repeated(n time.Time) bool {
	loc := w.spec.Location
	start, _ := n.In(loc).ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, before := start.Add(-time.Second).In(loc).Zone()
	_, after := n.In(loc).Zone()
	return before > after && n.Before(start.Add(time.Duration(before-after)*time.Second))
}

// every is "@every d": the multiples of d since the Unix epoch. robfig/cron counts d from whenever
// it is asked; anchored instants are the same on every node and across restarts, as persisted
// schedules need.
type every struct {
	delay time.Duration
	loc   *time.Location
}

// Next returns the first instant after t.
func (e every) Next(t time.Time) time.Time {
	d := int64(e.delay / time.Second)
	u := t.Unix()
	k := u / d
	if u%d < 0 {
		k-- // floor for times before the epoch
	}
	return time.Unix((k+1)*d, 0).In(e.loc)
}
