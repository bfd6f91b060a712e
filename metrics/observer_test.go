package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobpipe/jobpipe/backoff"
	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/metrics"
)

// Known jobs give exact counters, one histogram observation per attempt, lock attempts equal to the
// dispatcher's own count, and one key run per attempt, since every job has its own key. No label
// carries a key.
func TestOutcomeCountersWithoutKeyLabels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	kind := jobinfo.MustDefine[account]("metrics_outcomes", jobinfo.MaxAttempts(2),
		jobinfo.Backoff(backoff.Constant(10*time.Millisecond)))
	createKind(t, b.db, kind)
	modes := map[string]int{"ok": 4, "flaky": 2, "bad": 3, "discard": 1, "snooze": 1, "again": 1}
	first := map[int64]bool{} // ids enqueued here (RunAgain's next run has another)
	n := 0
	for _, mode := range slices.Sorted(maps.Keys(modes)) {
		for range modes[mode] {
			n++
			first[mustEnqueue(t, b.db, kind, account{Account: fmt.Sprintf("acct-%d-%d", n, time.Now().UnixNano()), Mode: mode})] = true
		}
	}
	var mu sync.Mutex
	runs := map[int64]int{}
	d := b.start(t, b.config(t), func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[account]) error {
			mu.Lock()
			runs[j.ID]++
			run := runs[j.ID]
			mu.Unlock()
			switch j.Data.Mode {
			case "flaky":
				if j.Attempt == 1 {
					return errors.New("first attempt fails")
				}
			case "bad":
				return fmt.Errorf("attempt %d fails", j.Attempt)
			case "discard":
				return dispatcher.Discard(errors.New("cannot be fixed by retrying"))
			case "snooze":
				if run == 1 {
					return dispatcher.Snooze(10 * time.Millisecond)
				}
			case "again":
				if first[j.ID] {
					return dispatcher.RunAgain(0)
				}
			}
			return nil
		})
	})
	want := map[string]float64{
		"processed": 8, // ok 4, flaky 2, snooze 1, and again's next run
		"retried":   5, // flaky 2, bad 3
		"failed":    3, // bad
		"discarded": 1,
		"snoozed":   1,
		"run_again": 1,
	}
	const attempts = 19
	var e exposition
	waitFor(t, "every attempt counted", 15*time.Second, func() bool {
		e = scrape(t, b.url)
		total, runs := 0.0, 0.0
		for _, o := range dispatcher.Outcomes() {
			v, _ := e.value(metrics.JobsFinished, "kind", "metrics_outcomes", "outcome", o.String())
			total += v
		}
		for _, end := range dispatcher.RunEnds() {
			v, _ := e.value(metrics.KeyRuns, "ended", end.String(), "kind", "metrics_outcomes")
			runs += v
		}
		return total >= attempts && runs >= attempts
	})
	for _, o := range dispatcher.Outcomes() {
		got, ok := e.value(metrics.JobsFinished, "kind", "metrics_outcomes", "outcome", o.String())
		if !ok || got != want[o.String()] {
			t.Errorf("%s{outcome=%q} = %v (present %t), want %v", metrics.JobsFinished, o, got, ok, want[o.String()])
		}
		// One duration per finished attempt; outcomes never seen have no histogram yet.
		h := e.metric(metrics.JobDuration, "kind", "metrics_outcomes", "outcome", o.String())
		switch {
		case want[o.String()] == 0 && h != nil:
			t.Errorf("%s{outcome=%q} exists although no job had that outcome", metrics.JobDuration, o)
		case want[o.String()] > 0 && (h == nil || float64(h.GetHistogram().GetSampleCount()) != want[o.String()]):
			t.Errorf("%s{outcome=%q}: %v, want %v observations", metrics.JobDuration, o, h, want[o.String()])
		}
	}
	if lag := e.metric(metrics.ScheduleLag, "kind", "metrics_outcomes"); lag.GetHistogram().GetSampleCount() != attempts {
		t.Errorf("%s count = %d, want one per attempt (%d)", metrics.ScheduleLag, lag.GetHistogram().GetSampleCount(), attempts)
	}
	// Each attempt took a queue lock and an execution lock; a refused attempt would not hold a job.
	locks := d.Stats().Locks
	for r, want := range map[string]uint64{"acquired": locks.Acquired, "taken": locks.Taken, "unavailable": locks.Unavailable} {
		if got, _ := e.value(metrics.LockAcquire, "kind", "metrics_outcomes", "result", r); got != float64(want) {
			t.Errorf("%s{result=%q} = %v, want the dispatcher's %d", metrics.LockAcquire, r, got, want)
		}
	}
	if locks.Acquired != 2*attempts {
		t.Errorf("locks acquired %d, want %d (a queue and an execution lock per attempt)", locks.Acquired, 2*attempts)
	}
	// A run ends with its job: at an outcome that leaves the job to run again (flaky 2 and bad 3
	// retried, the snooze, the RunAgain), else for want of another job of its key.
	wantRuns := map[string]float64{"outcome": 7, "no_next": 12}
	for _, end := range dispatcher.RunEnds() {
		if got, _ := e.value(metrics.KeyRuns, "ended", end.String(), "kind", "metrics_outcomes"); got != wantRuns[end.String()] {
			t.Errorf("%s{ended=%q} = %v, want %v", metrics.KeyRuns, end, got, wantRuns[end.String()])
		}
	}

	if got, ok := e.value(metrics.PausesMissed, "kind", "metrics_outcomes"); !ok || got != 0 {
		t.Errorf("%s = %v (present %t), want 0 from the kind's first key run: no pass went without its pause",
			metrics.PausesMissed, got, ok)
	}

	// Cardinality: kind, outcome and result only, from fixed sets; never a key.
	if strings.Contains(e.text, "acct-") {
		t.Errorf("a key reached the exposition:\n%s", e.text)
	}
	allowed := map[string][]string{"kind": {"metrics_outcomes"}, "outcome": outcomeNames(), "result": {"acquired", "taken", "unavailable"},
		"ended": {"no_next", "budget", "outcome", "lost", "abandoned", "stopped"}}
	series := 0
	for name, fam := range e.families {
		for _, m := range fam.GetMetric() {
			series++
			for _, l := range m.GetLabel() {
				if !slices.Contains(allowed[l.GetName()], l.GetValue()) {
					t.Errorf("%s has label %s=%q", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
	// 4 gauges, 1 error counter, 10 outcome counters, 6 duration histograms (outcomes seen), 1 lag
	// histogram, 3 lock counters, 1 rescue counter, the 2 lock node gauges, the kind's lock wait
	// gauge, 6 key-run counters and the missed-pause counter: whatever the number of keys.
	if want := 4 + 1 + 10 + 6 + 1 + 3 + 1 + 2 + 1 + 6 + 1; series != want {
		t.Errorf("%d series, want %d", series, want)
	}
}

// A job that started 90 s after it was due shows in the lag histogram; a job whose worker died is
// counted as rescued by the process that took it back, not as finished.
func TestScheduleLagAndRescues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	late := jobinfo.MustDefine[task]("metrics_late")
	dead := jobinfo.MustDefine[task]("metrics_dead", jobinfo.MaxAttempts(1))
	createKind(t, b.db, late)
	createKind(t, b.db, dead)
	lateID := mustEnqueue(t, b.db, late, task{N: 1})
	if _, err := b.db.Exec(ctx, `UPDATE metrics_late SET process_after = now() - interval '90 seconds' WHERE id = $1`, lateID); err != nil {
		t.Fatal(err)
	}
	deadID := mustEnqueue(t, b.db, dead, task{N: 1})
	_, err := b.db.Exec(ctx, `UPDATE metrics_dead SET attempts_made = 1, started_at = now() - interval '2 minutes',
		lease_expires_at = now() - interval '1 minute', lease_owner = 'gone', lock_token = lock_token + 1 WHERE id = $1`, deadID)
	if err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context, *dispatcher.Job[task]) error { return nil }
	b.start(t, b.config(t), func(d *dispatcher.Dispatcher) error {
		return firstErr(dispatcher.Register(d, late, ok), dispatcher.Register(d, dead, ok))
	})
	var e exposition
	waitFor(t, "the late job run and the dead one rescued", 10*time.Second, func() bool {
		e = scrape(t, b.url)
		processed, _ := e.value(metrics.JobsFinished, "kind", "metrics_late", "outcome", "processed")
		rescued, _ := e.value(metrics.RescuedJobs, "kind", "metrics_dead")
		return processed == 1 && rescued == 1
	})
	h := e.metric(metrics.ScheduleLag, "kind", "metrics_late").GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() < 90 || h.GetSampleSum() > 120 {
		t.Errorf("lag: %d observations summing to %vs, want one of 90 s and a little", h.GetSampleCount(), h.GetSampleSum())
	}
	for _, bk := range h.GetBucket() {
		want := uint64(0)
		if bk.GetUpperBound() >= 120 {
			want = 1
		}
		if bk.GetUpperBound() >= 90 && bk.GetUpperBound() < 120 {
			continue // depends on how long the claim took
		}
		if bk.GetCumulativeCount() != want {
			t.Errorf("lag bucket le=%v holds %d, want %d", bk.GetUpperBound(), bk.GetCumulativeCount(), want)
		}
	}
	for _, o := range outcomeNames() {
		if v, _ := e.value(metrics.JobsFinished, "kind", "metrics_dead", "outcome", o); v != 0 {
			t.Errorf("the rescued job counted as %s here", o)
		}
	}
	if n := countWhere(t, b.db, "metrics_dead", "failed_at IS NOT NULL AND last_error LIKE 'lease expired: gone %'"); n != 1 {
		t.Errorf("the rescued job was not failed by the rescuer (%d rows)", n)
	}
}

// A job's path adds to series made at registration: no allocation per job. (Not parallel:
// AllocsPerRun counts the whole process's allocations.)
func TestObserverAllocatesNothingPerJob(t *testing.T) {
	obs, err := metrics.NewObserver(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	k := obs.Kind("hot")
	k.JobFinished(dispatcher.OutcomeProcessed, time.Millisecond) // makes the outcome's histogram
	allocs := testing.AllocsPerRun(1000, func() {
		k.JobStarted(time.Millisecond)
		k.JobFinished(dispatcher.OutcomeProcessed, time.Millisecond)
		k.LockAttempts(dispatcher.LockAcquired, 2)
		k.Rescued(1)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per job, want 0", allocs)
	}
}

// Observers made on one registry share its metrics, and Kind returns the same series each time.
func TestObserversShareARegistry(t *testing.T) {
	t.Parallel()
	reg, one := newObserver(t)
	two, err := metrics.NewObserver(reg, metrics.WithDurationBuckets([]float64{1}), metrics.WithLagBuckets([]float64{1}))
	if err != nil {
		t.Fatal(err)
	}
	one.Kind("shared").JobFinished(dispatcher.OutcomeFailed, time.Second)
	two.Kind("shared").JobFinished(dispatcher.OutcomeFailed, time.Second)
	one.Kind("shared").Rescued(3)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			if m.Counter != nil && m.GetCounter().GetValue() > 0 {
				got[f.GetName()] += m.GetCounter().GetValue()
			}
		}
	}
	if fmt.Sprint(got) != "map[jobpipe_jobs_finished_total:2 jobpipe_rescued_jobs_total:3]" {
		t.Errorf("counters %v, want 2 failed and 3 rescued", got)
	}
	if _, err := metrics.NewObserver(refusing{reg}); err == nil || !strings.HasPrefix(err.Error(), "metrics: ") {
		t.Errorf("NewObserver on a registry that refuses its metrics: error %v", err)
	}
}

// A kind's missed pauses count in its own series, which a kind gets at its first key run or missed
// pause: a kind that never ran a key run has none.
func TestPausesMissedCountByKind(t *testing.T) {
	t.Parallel()
	reg, obs := newObserver(t)
	stalled, ok := obs.Kind("stalled").(dispatcher.PauseObserver)
	if !ok {
		t.Fatal("a kind's observer does not implement dispatcher.PauseObserver")
	}
	stalled.PauseMissed()
	stalled.PauseMissed()
	obs.Kind("running").(dispatcher.KeyRunObserver).KeyRunEnded(dispatcher.RunEndNoNext, 3)
	obs.Kind("plain").JobFinished(dispatcher.OutcomeProcessed, time.Millisecond)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != metrics.PausesMissed {
			continue
		}
		for _, m := range f.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	if fmt.Sprint(got) != "map[running:0 stalled:2]" {
		t.Errorf("%s by kind: %v, want stalled 2 and running 0, and no series for plain", metrics.PausesMissed, got)
	}
}

// refusing is a registry that refuses every metric.
type refusing struct{ prometheus.Registerer }

func (refusing) Register(prometheus.Collector) error { return errors.New("refused") }

func outcomeNames() []string {
	var names []string
	for _, o := range dispatcher.Outcomes() {
		names = append(names, o.String())
	}
	return names
}
