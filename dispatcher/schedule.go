package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/schedule"
)

// scheduleLease names the lease in jobpipe_leaders that elects the node firing a schedule. It is per
// schedule, so that the schedules spread over the nodes rather than all following one.
func scheduleLease(name string) string { return "schedule:" + name }

// scheduleRunner is one schedule added with AddSchedule.
type scheduleRunner struct {
	sched   *schedule.Schedule
	kind    string
	data    json.RawMessage // the job's data columns as JSON, for display in jobpipe_schedules
	enqueue schedule.EnqueueFunc

	// Owned by leadSchedules.
	leading bool
	next    time.Time // next_run_at as the last round left it, by the database's clock; zero: fire to learn it
	lastErr string    // the last round's error, so that a lasting one is logged once
}

// AddSchedule makes kind's job recur: at each instant of spec, the node leading the schedule (one
// node at a time, elected through lease "schedule:<name>" in jobpipe_leaders) enqueues job, with
// process_after set to the instant (the handler reads it as Job.ProcessAfter). Call it before
// Start, after Register of kind. Start stores the schedule in jobpipe_schedules, keeping its next
// run when it is stored already with the same cron expression and zone (otherwise the next run is
// computed afresh from now).
//
// Each instant is enqueued once, in the transaction that records it in jobpipe_schedule_firings
// and advances next_run_at, so a change of leader never doubles an instant, and a restart continues
// from the stored next run: missed instants are then fired or skipped as spec.CatchUp says. The job
// is enqueued like any other: if the kind has unique fields and an equal job is still waiting, the
// instant is recorded with that job's id, not a new one.
//
// Every node that adds the schedule should add the same spec and job: the leader fires the spec
// stored by the last node to start, with the job its own code gives.
func AddSchedule[T any](d *Dispatcher, kind *jobinfo.Kind[T], spec schedule.Spec, job T) error {
	if kind == nil {
		return errors.New("dispatcher: AddSchedule: kind is nil")
	}
	s, err := schedule.Parse(spec)
	if err != nil {
		return fmt.Errorf("dispatcher: AddSchedule: %w", err)
	}
	info := kind.Info()
	r := &scheduleRunner{sched: s, kind: info.Name, data: jobData(info, kind.Values(&job)),
		enqueue: func(ctx context.Context, tx pgx.Tx, at time.Time) (int64, error) {
			res, err := EnqueueTx(ctx, tx, kind, job, ProcessAfter(at))
			return res.ID, err
		}}
	d.mu.Lock()
	defer d.mu.Unlock()
	name := s.Spec().Name
	switch {
	case d.state != stateNew:
		return fmt.Errorf("dispatcher: AddSchedule %q: the dispatcher has started; add schedules before Start", name)
	case d.kinds[info.Name] == nil:
		return fmt.Errorf("dispatcher: AddSchedule %q: kind %q is not registered with this dispatcher: call Register first", name, info.Name)
	case d.kinds[info.Name].info != info:
		return fmt.Errorf("dispatcher: AddSchedule %q: kind %q is registered with another definition of that name: pass the *jobinfo.Kind given to Register", name, info.Name)
	case d.schedules[name] != nil:
		return fmt.Errorf("dispatcher: AddSchedule %q: a schedule of that name is added already", name)
	}
	if d.schedules == nil {
		d.schedules = map[string]*scheduleRunner{}
	}
	d.schedules[name] = r
	return nil
}

// jobData returns a job's data columns as a JSON object, or nil if a value has no JSON form.
func jobData(info *jobinfo.Info, values []any) json.RawMessage {
	m := make(map[string]any, len(values))
	for i, c := range info.Columns() {
		m[c] = values[i]
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return b
}

// saveSchedules stores every added schedule (Start calls it once the kinds are registered).
func (d *Dispatcher) saveSchedules(ctx context.Context) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(d.schedules)) {
		r := d.schedules[name]
		saved, err := schedule.Save(ctx, d.cfg.DB, r.kind, r.sched, r.data)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("dispatcher: Start: %w", err))
		case saved.Rescheduled:
			d.logger.Info("dispatcher: schedule's cron spec or zone changed: its next run is computed afresh from now",
				"schedule", name, "spec", r.sched.String(), "next_run_at", saved.NextRunAt)
		case saved.Created:
			d.logger.Info("dispatcher: schedule stored", "schedule", name, "spec", r.sched.String(), "next_run_at", saved.NextRunAt)
		}
	}
	return errors.Join(errs...)
}

// leadSchedules fires the schedules whose lease this node holds, each at its next instant. Leases
// are taken and renewed every RescueInterval, as the rescuer's are; between renewals a timer wakes
// the loop at the earliest next instant, so an every-second schedule fires each second on time.
// Timers follow the database's clock (next_run_at is on it): the loop keeps the difference between
// that clock and this machine's, as seen by the last round.
//
// Leadership only keeps the other nodes from contending: exactness comes from Fire's transaction,
// which locks the schedule's row and records each instant under a primary key. A node that believes
// it still leads after its lease passed to another fires nothing the other fired.
func (l *leader) leadSchedules(ctx context.Context) {
	runners := make([]*scheduleRunner, 0, len(l.schedules))
	for _, name := range slices.Sorted(maps.Keys(l.schedules)) {
		runners = append(runners, l.schedules[name])
	}
	var renewAt time.Time
	var skew time.Duration // the database's clock minus this machine's
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if !time.Now().Before(renewAt) {
			l.renewScheduleLeases(ctx, runners)
			renewAt = time.Now().Add(l.cfg.RescueInterval)
		}
		wake := renewAt
		for _, r := range runners {
			if !r.leading || ctx.Err() != nil {
				continue
			}
			if r.next.IsZero() || !r.next.After(time.Now().Add(skew)) {
				l.fireSchedule(ctx, r, &skew)
			}
			if at := r.next.Add(-skew); at.Before(wake) {
				wake = at
			}
		}
		timer.Reset(time.Until(wake))
		select {
		case <-ctx.Done():
			// As the rescuer does: hand over at once, every lease (a renewal that timed out may have
			// been committed all the same).
			c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			for _, r := range runners {
				_, _ = l.db.Exec(c, resignSQL, scheduleLease(r.sched.Spec().Name), l.cfg.NodeName)
			}
			cancel()
			return
		case <-timer.C:
		}
	}
}

func (l *leader) renewScheduleLeases(ctx context.Context, runners []*scheduleRunner) {
	round, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.LeaderTTL)
	defer cancel()
	for _, r := range runners {
		was := r.leading
		r.leading = l.takeLead(round, scheduleLease(r.sched.Spec().Name), was)
		if r.leading && !was {
			r.next = time.Time{} // another node may have fired meanwhile: learn next_run_at by firing
		}
	}
}

// fireSchedule runs one round of r and sets r.next to when the next one is due.
func (l *leader) fireSchedule(ctx context.Context, r *scheduleRunner, skew *time.Duration) {
	name := r.sched.Spec().Name
	// A round that has begun runs to completion even when Stop comes meanwhile: its commit, cancelled
	// on the client, could still land on the server, and the instants it fired would then go
	// uncounted (and unlogged). LeaderTTL bounds it.
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.LeaderTTL)
	defer cancel()
	round, err := schedule.Fire(c, l.db, name, schedule.MaxPerRound, r.enqueue)
	if err != nil {
		if ctx.Err() == nil && err.Error() != r.lastErr {
			l.logger.Warn("dispatcher: schedule round failed; retrying", "schedule", name, "err", err)
		}
		r.lastErr = err.Error()
		r.next = time.Now().Add(*skew + l.cfg.RescueInterval)
		return
	}
	if r.lastErr != "" {
		l.logger.Info("dispatcher: schedule fires again", "schedule", name)
		r.lastErr = ""
	}
	// Measured once the round is over, so the estimate errs on the late side by the round's length:
	// the next timer then never fires before the database sees the instant due.
	*skew = time.Until(round.Now)
	r.next = round.Plan.Next
	l.stats.scheduleFired.Add(int64(len(round.Fired)))
	l.stats.scheduleSkipped.Add(int64(round.Plan.Skipped))
	if p := round.Plan; p.Skipped > 0 {
		l.logger.Warn("dispatcher: schedule skipped missed instants, as its catch-up policy says",
			"schedule", name, "skipped", countText(p.Skipped, p.SkippedAtLeast), "catch_up", r.sched.Spec().CatchUp,
			"fired", len(round.Fired), "next_run_at", p.Next)
	}
	if n := len(round.Fired); n > 0 {
		l.logger.Debug("dispatcher: schedule fired", "schedule", name, "instants", n,
			"last", round.Fired[n-1].At, "job", round.Fired[n-1].JobID)
	}
}

func countText(n int, atLeast bool) string {
	if atLeast {
		return fmt.Sprintf("at least %d", n)
	}
	return fmt.Sprint(n)
}
