package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/backoff"
	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/execlock"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// recorder is a dispatcher.Observer that keeps every event, per kind.
type recorder struct {
	mu       sync.Mutex
	kinds    map[string]int // Kind calls
	lags     map[string][]time.Duration
	finished map[string]map[dispatcher.Outcome]int
	locks    map[string]map[dispatcher.LockResult]int
	rescued  map[string]int
	runs     map[string]map[dispatcher.RunEnd][]int // each key run's length, by how it ended
	pauses   map[string]int                         // PauseMissed calls
	// lockNodes are the LockNodes calls ("dispatcher up/total"), lockWaits the LockWait calls by kind.
	lockNodes []string
	lockWaits map[string][]bool
}

func newRecorder() *recorder {
	return &recorder{kinds: map[string]int{}, lags: map[string][]time.Duration{},
		finished: map[string]map[dispatcher.Outcome]int{}, locks: map[string]map[dispatcher.LockResult]int{},
		rescued: map[string]int{}, pauses: map[string]int{}, runs: map[string]map[dispatcher.RunEnd][]int{}, lockWaits: map[string][]bool{}}
}

func (r *recorder) LockNodes(dispatcher string, up, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lockNodes = append(r.lockNodes, fmt.Sprintf("%s %d/%d", dispatcher, up, total))
}

func (r *recorder) Kind(name string) dispatcher.KindObserver {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kinds[name]++
	r.finished[name] = map[dispatcher.Outcome]int{}
	r.locks[name] = map[dispatcher.LockResult]int{}
	r.runs[name] = map[dispatcher.RunEnd][]int{}
	return kindRecorder{r, name}
}

// outcomes returns a copy of the kind's outcome counts and their total.
func (r *recorder) outcomes(kind string) (map[dispatcher.Outcome]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	total := 0
	for _, n := range r.finished[kind] {
		total += n
	}
	return maps.Clone(r.finished[kind]), total
}

type kindRecorder struct {
	r    *recorder
	name string
}

func (k kindRecorder) JobStarted(lag time.Duration) {
	k.r.mu.Lock()
	defer k.r.mu.Unlock()
	k.r.lags[k.name] = append(k.r.lags[k.name], lag)
}

func (k kindRecorder) JobFinished(o dispatcher.Outcome, _ time.Duration) {
	k.r.mu.Lock()
	defer k.r.mu.Unlock()
	k.r.finished[k.name][o]++
}

func (k kindRecorder) LockAttempts(res dispatcher.LockResult, n int) {
	k.r.mu.Lock()
	defer k.r.mu.Unlock()
	k.r.locks[k.name][res] += n
}

func (k kindRecorder) LockWait(waiting bool) {
	k.r.mu.Lock()
	defer k.r.mu.Unlock()
	k.r.lockWaits[k.name] = append(k.r.lockWaits[k.name], waiting)
}

func (k kindRecorder) KeyRunEnded(why dispatcher.RunEnd, jobs int) {
	k.r.mu.Lock()
	defer k.r.mu.Unlock()
	k.r.runs[k.name][why] = append(k.r.runs[k.name][why], jobs)
}

func (k kindRecorder) PauseMissed() {
	k.r.mu.Lock()
	defer k.r.mu.Unlock()
	k.r.pauses[k.name]++
}

// pausesMissed returns how many times the kind's PauseMissed was called.
func (r *recorder) pausesMissed(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pauses[kind]
}

// keyRuns returns a copy of the kind's key runs: their lengths, by how they ended.
func (r *recorder) keyRuns(kind string) map[dispatcher.RunEnd][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.runs[kind])
}

func (k kindRecorder) Rescued(n int) {
	k.r.mu.Lock()
	defer k.r.mu.Unlock()
	k.r.rescued[k.name] += n
}

// The observer sees one outcome per attempt, with what the handler asked for, and a lost lease or a
// finish the row no longer accepted instead of what the handler returned.
func TestObserverSeesEveryOutcome(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("observed", jobinfo.MaxAttempts(2), jobinfo.Backoff(backoff.Constant(10*time.Millisecond)))
	createKind(t, b.db, kind)
	ctx := context.Background()
	takeBack := func(id int64) {
		// What a rescuer does: the worker's token is no longer the row's (and the row waits an hour).
		_, err := b.db.Exec(ctx, `UPDATE observed SET lock_token = lock_token + 1, lease_expires_at = NULL,
			lock_slot = NULL, process_after = now() + interval '1 hour' WHERE id = $1`, id)
		if err != nil {
			t.Error(err)
		}
	}
	var mu sync.Mutex
	seen := map[int64]int{} // runs per job id
	ids := map[string]int64{}
	for i, note := range []string{"ok", "flaky", "bad", "discard", "snooze", "again", "stale", "lost", "gone"} {
		res, err := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: int64(i), Note: note})
		if err != nil {
			t.Fatal(err)
		}
		ids[note] = res.ID
	}
	rec := newRecorder()
	cfg := b.cfg
	cfg.Observer = rec
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[plainJob]) error {
			mu.Lock()
			seen[j.ID]++
			run := seen[j.ID]
			mu.Unlock()
			switch j.Data.Note {
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
				if j.ID == ids["again"] {
					return dispatcher.RunAgain(0)
				}
			case "stale":
				takeBack(j.ID)
			case "gone":
				// Lost, and the row has moved on by the time the outcome is written: stale.
				takeBack(j.ID)
				return j.Heartbeat(ctx)
			case "lost":
				if j.Attempt == 1 {
					takeBack(j.ID)
					err := j.Heartbeat(ctx)
					// The row is this attempt's again when its outcome is written: a lost lease, not a
					// stale finish. The job runs again.
					if _, uerr := b.db.Exec(context.Background(), `UPDATE observed SET lock_token = lock_token - 1,
						lease_expires_at = now() + interval '1 minute' WHERE id = $1`, j.ID); uerr != nil {
						t.Error(uerr)
					}
					return err
				}
			}
			return nil
		})
	})
	want := map[dispatcher.Outcome]int{
		dispatcher.OutcomeProcessed: 5, // ok, flaky, snooze, the next run of again, lost's second attempt
		dispatcher.OutcomeRetried:   2, // flaky, bad
		dispatcher.OutcomeFailed:    1, // bad
		dispatcher.OutcomeDiscarded: 1,
		dispatcher.OutcomeSnoozed:   1,
		dispatcher.OutcomeRunAgain:  1,
		dispatcher.OutcomeStale:     2, // stale, gone
		dispatcher.OutcomeLeaseLost: 1,
	}
	waitFor(t, "14 outcomes", 15*time.Second, func() (bool, error) {
		_, total := rec.outcomes("observed")
		return total >= 14, nil
	})
	got, _ := rec.outcomes("observed")
	// Stats counts the same outcomes the observer sees, and they add up to the claimed jobs.
	st := d.Stats()
	counted := map[dispatcher.Outcome]int64{
		dispatcher.OutcomeProcessed: st.Processed, dispatcher.OutcomeRetried: st.Retried, dispatcher.OutcomeFailed: st.Failed,
		dispatcher.OutcomeDiscarded: st.Discarded, dispatcher.OutcomeSnoozed: st.Snoozed, dispatcher.OutcomeRunAgain: st.RunAgain,
		dispatcher.OutcomeReleased: st.Released, dispatcher.OutcomeLeaseLost: st.LeasesLost, dispatcher.OutcomeStale: st.StaleFinishes,
		dispatcher.OutcomeTimedOut: st.TimedOut,
	}
	var total int64
	for _, o := range dispatcher.Outcomes() {
		if got[o] != want[o] {
			t.Errorf("outcome %s: observed %d, want %d (all: %v)", o, got[o], want[o], got)
		}
		if counted[o] != int64(want[o]) {
			t.Errorf("outcome %s: Stats counts %d, want %d (stats: %+v)", o, counted[o], want[o], st)
		}
		total += counted[o]
	}
	if total != st.Claimed {
		t.Errorf("Stats counts %d outcomes for %d claimed jobs; want one each", total, st.Claimed)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.kinds["observed"] != 1 {
		t.Errorf("Kind called %d times for the kind, want once", rec.kinds["observed"])
	}
	if len(rec.lags["observed"]) != 14 {
		t.Errorf("%d starts observed, want 14 (one per attempt)", len(rec.lags["observed"]))
	}
	for _, lag := range rec.lags["observed"] {
		if lag < 0 || lag > 10*time.Second {
			t.Errorf("schedule lag %v: want between 0 and the test's length", lag)
		}
	}
	if n := rec.locks["observed"]; len(n) != 0 && (n[dispatcher.LockAcquired]+n[dispatcher.LockTaken]+n[dispatcher.LockUnavailable]) != 0 {
		t.Errorf("a kind without a key made lock attempts: %v", n)
	}
}

// A job whose execution lock is held elsewhere is given back (released) and runs later; the observer
// counts each lock attempt as execlock does, and the rescuer's work.
func TestObserverSeesLocksAndRescues(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	ctx := context.Background()
	keyed := jobinfo.MustDefine[postSync]("observed_keyed")
	plain := jobinfo.MustDefine[plainJob]("observed_plain", jobinfo.MaxAttempts(1))
	createKind(t, b.db, keyed)
	createKind(t, b.db, plain)

	// Someone else holds the execution lock of key 7's only slot.
	intruder, err := execlock.New(&execlock.Config{Nodes: b.redis.Clients, Prefix: b.redis.Prefix, ExecTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer intruder.Close()
	held, err := intruder.TryExec(ctx, "observed_keyed", "7", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dispatcher.Enqueue(ctx, b.db, keyed, postSync{BlogID: 7, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	// A job whose worker died: its lease expired a minute ago, on its only attempt.
	dead, err := dispatcher.Enqueue(ctx, b.db, plain, plainJob{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.db.Exec(ctx, `UPDATE observed_plain SET attempts_made = 1, started_at = now() - interval '2 minutes',
		lease_expires_at = now() - interval '1 minute', lease_owner = 'gone', lock_token = lock_token + 1 WHERE id = $1`, dead.ID)
	if err != nil {
		t.Fatal(err)
	}

	rec := newRecorder()
	cfg := b.cfg
	cfg.Observer = rec
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		if err := dispatcher.Register(d, keyed, func(context.Context, *dispatcher.Job[postSync]) error { return nil }); err != nil {
			return err
		}
		return dispatcher.Register(d, plain, func(context.Context, *dispatcher.Job[plainJob]) error { return nil })
	})
	waitFor(t, "the job given back", 10*time.Second, func() (bool, error) {
		got, _ := rec.outcomes("observed_keyed")
		return got[dispatcher.OutcomeReleased] == 1, nil
	})
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job processed", 10*time.Second, func() (bool, error) {
		got, _ := rec.outcomes("observed_keyed")
		return got[dispatcher.OutcomeProcessed] == 1, nil
	})
	waitFor(t, "the dead job rescued", 10*time.Second, func() (bool, error) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.rescued["observed_plain"] == 1, nil
	})

	got, total := rec.outcomes("observed_keyed")
	if total != 2 {
		t.Errorf("outcomes %v, want released then processed", got)
	}
	rec.mu.Lock()
	locks := maps.Clone(rec.locks["observed_keyed"])
	rec.mu.Unlock()
	// Two claims, each with its queue lock; the first one's execution lock was found taken at each of
	// its three tries (a key run that just ended may still be giving it back), the second's acquired.
	want := map[dispatcher.LockResult]int{dispatcher.LockAcquired: 3, dispatcher.LockTaken: 3}
	for _, r := range dispatcher.LockResults() {
		if locks[r] != want[r] {
			t.Errorf("lock attempts %s: %d, want %d", r, locks[r], want[r])
		}
	}
	s := d.Stats().Locks
	if uint64(locks[dispatcher.LockAcquired]) != s.Acquired || uint64(locks[dispatcher.LockTaken]) != s.Taken ||
		uint64(locks[dispatcher.LockUnavailable]) != s.Unavailable {
		t.Errorf("observed lock attempts %v differ from the dispatcher's Stats.Locks %+v", locks, s)
	}
	if got, _ := rec.outcomes("observed_plain"); len(got) != 0 {
		t.Errorf("a rescued job was counted as finished by this dispatcher: %v", got)
	}
}

func TestOutcomeAndLockResultNames(t *testing.T) {
	t.Parallel()
	var names []string
	for _, o := range dispatcher.Outcomes() {
		names = append(names, o.String())
	}
	for _, r := range dispatcher.LockResults() {
		names = append(names, r.String())
	}
	want := "[processed retried failed discarded snoozed run_again released lease_lost stale timed_out acquired taken unavailable]"
	if fmt.Sprint(names) != want {
		t.Errorf("names %v, want %s", names, want)
	}
	if dispatcher.Outcome(200).String() != "unknown" || dispatcher.LockResult(200).String() != "unknown" {
		t.Error("an out-of-range value should print as unknown")
	}
}
