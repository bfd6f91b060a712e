package schedule

import "time"

// MaxPerRound is the most instants one round (one transaction of Fire) fires when a caller gives no
// bound. A schedule with more due instants, under CatchUpAll after a long outage, continues in the next
// round at once; a round stays a short transaction.
const MaxPerRound = 100

// maxCounted bounds how many missed instants Plan walks one by one to count them; past it Plan jumps
// ahead, and Plan.Skipped is a lower bound (an every-second schedule stopped for days).
const maxCounted = 100_000

// Plan is what one round fires, and where the schedule stands afterwards.
type Plan struct {
	// Fire lists the instants to fire, ascending.
	Fire []time.Time
	// Skipped counts the missed instants the catch-up policy leaves out.
	Skipped int
	// SkippedAtLeast reports that there were too many missed instants to count: Skipped is a lower
	// bound.
	SkippedAtLeast bool
	// Next is the new next_run_at: the first instant after now, or, when max cut the round short, the
	// first instant not yet fired (at or before now: call again).
	Next time.Time
}

// More reports whether due instants remain for another round: max cut this one short.
func (p Plan) More(now time.Time) bool { return !p.Next.After(now) }

// Plan computes which instants to fire at now, given next, the persisted next_run_at (the earliest
// instant not yet fired or skipped): the instants from next to now, as the catch-up policy keeps
// them, at most max (MaxPerRound if max < 1). Instants no older than the grace always fire; older
// ones are missed: CatchUpAll fires them, CatchUpLast the latest of them, CatchUpNone none. It is
// pure: the same arguments give the same plan.
func (s *Schedule) Plan(next, now time.Time, max int) Plan {
	if max < 1 {
		max = MaxPerRound
	}
	var p Plan
	t, ok := s.atOrAfter(next)
	if s.spec.CatchUp != CatchUpAll {
		cutoff := now.Add(-s.spec.Grace)
		var last time.Time
		n, jumped := 0, false
		for ok && t.Before(cutoff) {
			if n == maxCounted {
				last, jumped = s.lastBefore(cutoff, t), true
				t, ok = s.atOrAfter(cutoff)
				break
			}
			last, n = t, n+1
			t, ok = s.after(t)
		}
		if n > 0 && s.spec.CatchUp == CatchUpLast {
			p.Fire = append(p.Fire, last)
			if !jumped {
				n-- // the latest missed instant was counted among the walked ones
			}
		}
		p.Skipped, p.SkippedAtLeast = n, jumped
	}
	for ok && !t.After(now) && len(p.Fire) < max {
		p.Fire = append(p.Fire, t)
		t, ok = s.after(t)
	}
	p.Next = t
	return p
}

// Next returns the schedule's first instant after t, in the schedule's zone, or the zero time if
// there is none within five years.
func (s *Schedule) Next(t time.Time) time.Time {
	if n := s.sched.Next(t); !n.IsZero() {
		return n.In(s.loc)
	}
	return time.Time{}
}

// after returns the first instant after t. When there is none within the years robfig/cron searches
// (five), ok is false and the time returned is a bound four years on, before which there is none:
// persisted as next_run_at, it makes a later round look again from there.
func (s *Schedule) after(t time.Time) (time.Time, bool) {
	if n := s.Next(t); !n.IsZero() {
		return n, true
	}
	return t.AddDate(4, 0, 0), false
}

// atOrAfter returns the first instant at or after t (instants are whole seconds).
func (s *Schedule) atOrAfter(t time.Time) (time.Time, bool) { return s.after(t.Add(-time.Nanosecond)) }

// lastBefore returns the latest instant before cutoff and not before floor, itself an instant before
// cutoff. It searches back from cutoff in doubling windows, so that a long run of missed instants is
// not walked from its start.
func (s *Schedule) lastBefore(cutoff, floor time.Time) time.Time {
	for w := time.Second; ; w *= 2 {
		from := cutoff.Add(-w)
		if from.Before(floor) {
			from = floor
		}
		if t, ok := s.atOrAfter(from); ok && t.Before(cutoff) {
			for {
				u, ok := s.after(t)
				if !ok || !u.Before(cutoff) {
					return t
				}
				t = u
			}
		}
		if !from.After(floor) {
			return floor
		}
	}
}
