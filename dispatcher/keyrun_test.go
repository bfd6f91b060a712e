package dispatcher_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
)

// startOrder records the jobs in the order their handlers start, as "key/seq".
type startOrder struct {
	mu  sync.Mutex
	got []string
}

func (o *startOrder) add(j postSync) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, fmt.Sprintf("%d/%d", j.BlogID, j.Seq))
}

func (o *startOrder) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.got)
}

// enqueueSeq enqueues jobs of the keys given, one after another: keys[i] gets the next seq of its key.
func enqueueSeq(t *testing.T, b *runBundle, kind *jobinfo.Kind[postSync], keys ...int64) {
	t.Helper()
	seq := map[int64]int64{}
	var jobs []postSync
	for _, k := range keys {
		jobs = append(jobs, postSync{BlogID: k, Seq: seq[k]})
		seq[k]++
	}
	if _, err := dispatcher.EnqueueMany(context.Background(), b.db, kind, jobs); err != nil {
		t.Fatal(err)
	}
}

func repeatKey(k int64, n int) []int64 { return slices.Repeat([]int64{k}, n) }

// Two keys of ten jobs each on two workers: each key's jobs run in order in one key run, under the
// execution lock its first job took. Four lock calls in all (a queue lock and an execution lock per
// key) where one run per job would make forty.
func TestKeyRunWorksItsKeyUnderOneLock(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("run_one_lock")
	createKind(t, b.db, kind)
	enqueueSeq(t, b, kind, append(repeatKey(1, 10), repeatKey(2, 10)...)...)
	w := newKeyWatch()
	cfg := b.cfg
	cfg.Concurrency = 2
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[postSync]) error {
			w.enter(j.Data.BlogID, j.Data.Seq)
			defer w.leave(j.Data.BlogID)
			return nil
		})
	})
	waitFor(t, "all processed", 30*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "run_one_lock", "processed_at IS NOT NULL") == 20, nil
	})
	stopNow(t, d)
	w.mu.Lock()
	defer w.mu.Unlock()
	want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	for _, k := range []int64{1, 2} {
		if !slices.Equal(w.order[k], want) || w.maxSeen[k] != 1 {
			t.Errorf("key %d started %v with up to %d at once; want %v one at a time", k, w.order[k], w.maxSeen[k], want)
		}
	}
	s := d.Stats()
	if s.Claimed != 20 || s.RunClaimed != 18 || s.Processed != 20 {
		t.Errorf("stats: claimed %d, by runs %d, processed %d; want 20, 18, 20", s.Claimed, s.RunClaimed, s.Processed)
	}
	if want := [len(s.KeyRunsEnded)]int64{dispatcher.RunEndNoNext: 2}; s.KeyRunsEnded != want {
		t.Errorf("runs ended %v, want %v: one per key, each once its key had no job left", s.KeyRunsEnded, want)
	}
	if s.Locks.Acquired != 4 || s.Locks.Taken != 0 {
		t.Errorf("lock calls: %d acquired, %d taken; want 4 and 0", s.Locks.Acquired, s.Locks.Taken)
	}
	if n := countWhere(t, b.db, "run_one_lock", "attempts_made <> 1 OR lock_slot IS NOT NULL OR lease_expires_at IS NOT NULL"); n != 0 {
		t.Errorf("%d rows not processed cleanly on their first attempt", n)
	}
}

// A run gives its key back at its budget, and the job of another key that waits in the kind's order
// between the key's jobs starts then; without a budget the run works its key to the end first. Stats
// and the observer count each run's end: key 2's only job, and key 1's last under the larger budget,
// leave their run no next job.
func TestKeyRunGivesItsKeyBackAtItsBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		jobs int
		want []string
		ends map[dispatcher.RunEnd][]int // the runs' lengths, by how they ended
	}{
		{"budget of 5 jobs", 5, []string{"1/0", "1/1", "1/2", "1/3", "1/4", "2/0", "1/5", "1/6", "1/7", "1/8", "1/9"},
			map[dispatcher.RunEnd][]int{dispatcher.RunEndBudget: {5, 5}, dispatcher.RunEndNoNext: {1}}},
		{"budget of 100 jobs", 100, []string{"1/0", "1/1", "1/2", "1/3", "1/4", "1/5", "1/6", "1/7", "1/8", "1/9", "2/0"},
			map[dispatcher.RunEnd][]int{dispatcher.RunEndNoNext: {10, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newRun(t)
			kind := jobinfo.MustDefine[postSync]("run_budget")
			createKind(t, b.db, kind)
			enqueueSeq(t, b, kind, append(append(repeatKey(1, 5), 2), repeatKey(1, 5)...)...)
			var o startOrder
			runs := newRecorder()
			cfg := b.cfg
			cfg.Concurrency, cfg.KeyRunJobs, cfg.KeyRunTime, cfg.Observer = 1, tc.jobs, time.Hour, runs
			d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
				return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[postSync]) error {
					o.add(j.Data)
					return nil
				})
			})
			waitFor(t, "all processed", 30*time.Second, func() (bool, error) {
				return countWhere(t, b.db, "run_budget", "processed_at IS NOT NULL") == 11, nil
			})
			stopNow(t, d)
			if got := o.list(); !slices.Equal(got, tc.want) {
				t.Errorf("started %v, want %v", got, tc.want)
			}
			var want [len(dispatcher.Stats{}.KeyRunsEnded)]int64
			for end, lengths := range tc.ends {
				want[end] = int64(len(lengths))
			}
			if got := d.Stats().KeyRunsEnded; got != want {
				t.Errorf("Stats.KeyRunsEnded %v, want %v", got, want)
			}
			if got := runs.keyRuns("run_budget"); !maps.EqualFunc(got, tc.ends, slices.Equal) {
				t.Errorf("observed runs (lengths by end) %v, want %v", got, tc.ends)
			}
		})
	}
}

// A key run from its key's only waiting job ends with it: its finish does not look for a next job,
// and a job of the key enqueued while it ran starts through a claim pass, after it.
func TestKeyRunOfAKeysOnlyJobEndsWithIt(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("run_only_job")
	createKind(t, b.db, kind)
	var o startOrder
	running := make(chan struct{})
	release := make(chan struct{})
	d := b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[postSync]) error {
			o.add(j.Data)
			if j.Data.Seq == 0 {
				close(running)
				<-release
			}
			return nil
		})
	})
	enqueueSeq(t, b, kind, 1)
	<-running
	if _, err := dispatcher.Enqueue(context.Background(), b.db, kind, postSync{BlogID: 1, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	close(release)
	waitFor(t, "both processed", 30*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "run_only_job", "processed_at IS NOT NULL") == 2, nil
	})
	if got, want := o.list(), []string{"1/0", "1/1"}; !slices.Equal(got, want) {
		t.Errorf("started %v, want %v", got, want)
	}
	if s := d.Stats(); s.Claimed != 2 || s.RunClaimed != 0 {
		t.Errorf("stats: claimed %d, by runs %d; want 2 claimed by claim passes", s.Claimed, s.RunClaimed)
	}
}

// A run that has used its time gives its key back too: a job of another key waiting between the
// key's jobs starts before the key's last one.
func TestKeyRunGivesItsKeyBackAfterItsTime(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("run_time")
	createKind(t, b.db, kind)
	enqueueSeq(t, b, kind, append(append(repeatKey(1, 2), 2), repeatKey(1, 18)...)...)
	var o startOrder
	cfg := b.cfg
	cfg.Concurrency, cfg.KeyRunTime = 1, 50*time.Millisecond
	b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[postSync]) error {
			o.add(j.Data)
			time.Sleep(20 * time.Millisecond)
			return nil
		})
	})
	waitFor(t, "all processed", 30*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "run_time", "processed_at IS NOT NULL") == 21, nil
	})
	got := o.list()
	at := slices.Index(got, "2/0")
	// The run takes at least one job past the other key's place (it started before it) and stops
	// within 50 ms of 20 ms jobs, long before the key's 20 jobs are done.
	if at < 2 || at >= 19 {
		t.Errorf("the other key's job started at position %d of %v; want after the run's first jobs and before its last", at, got)
	}
}

// Pausing the key, pausing the kind or lowering the key's limit ends its runs at their running job,
// which finishes; the key's later jobs wait, unclaimed, until the change is undone.
func TestKeyRunEndsWhenItsLimitsChange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		limit        int // the kind's KeyLimit, and how many jobs block at first
		change, undo func(ctx context.Context, b *runBundle, kind string) error
	}{
		{"key paused", 1,
			func(ctx context.Context, b *runBundle, kind string) error {
				return limits.PauseKey(ctx, b.db, kind, "1")
			},
			func(ctx context.Context, b *runBundle, kind string) error {
				return limits.ResumeKey(ctx, b.db, kind, "1")
			}},
		{"kind paused", 1,
			func(ctx context.Context, b *runBundle, kind string) error { return limits.Pause(ctx, b.db, kind) },
			func(ctx context.Context, b *runBundle, kind string) error { return limits.Resume(ctx, b.db, kind) }},
		{"key limit lowered", 2,
			func(ctx context.Context, b *runBundle, kind string) error {
				return limits.SetKeyLimit(ctx, b.db, kind, 1)
			},
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := newRun(t)
			kind := jobinfo.MustDefine[postSync]("run_limits", jobinfo.KeyLimit(tc.limit))
			createKind(t, b.db, kind)
			enqueueSeq(t, b, kind, repeatKey(1, 6)...)
			release := make(chan struct{})
			var blocked sync.WaitGroup
			blocked.Add(tc.limit)
			w := newKeyWatch()
			cfg := b.cfg
			cfg.Concurrency = 4
			d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
				return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[postSync]) error {
					w.enter(j.Data.BlogID, j.Data.Seq)
					defer w.leave(j.Data.BlogID)
					w.mu.Lock()
					if n := w.running[1]; j.Data.Seq >= int64(tc.limit) && n > 1 {
						t.Errorf("job %d started with %d jobs of its key running, after the change", j.Data.Seq, n)
					}
					w.mu.Unlock()
					if j.Data.Seq < int64(tc.limit) {
						blocked.Done()
						<-release
					}
					return nil
				})
			})
			blocked.Wait()
			if err := tc.change(ctx, b, "run_limits"); err != nil {
				t.Fatal(err)
			}
			// Runs read the limits afresh, but claim passes use a copy a change reaches within a
			// second (its notification, or the copy's age): release the jobs once it has, so that
			// what follows is the change's effect, not a pass that has not seen it yet.
			time.Sleep(1100 * time.Millisecond)
			close(release)
			waitFor(t, "the running jobs processed", 10*time.Second, func() (bool, error) {
				return countWhere(t, b.db, "run_limits", "processed_at IS NOT NULL") >= tc.limit, nil
			})
			if tc.undo != nil {
				time.Sleep(time.Second) // the runs would have claimed the next jobs by now
				if n := countWhere(t, b.db, "run_limits", "processed_at IS NULL AND attempts_made = 0 AND lease_expires_at IS NULL"); n != 6-tc.limit {
					t.Fatalf("%d of the key's later jobs wait unclaimed after the change, want %d", n, 6-tc.limit)
				}
				s := d.Stats()
				if s.RunClaimed != 0 || s.Failed+s.Retried != 0 {
					t.Fatalf("stats %+v: the runs claimed or a running job did not finish", s)
				}
				if want := [len(s.KeyRunsEnded)]int64{dispatcher.RunEndNoNext: int64(tc.limit)}; s.KeyRunsEnded != want {
					t.Errorf("runs ended %v, want %v: each blocked job's run, for want of a next job", s.KeyRunsEnded, want)
				}
				if err := tc.undo(ctx, b, "run_limits"); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "all processed", 30*time.Second, func() (bool, error) {
				return countWhere(t, b.db, "run_limits", "processed_at IS NOT NULL") == 6, nil
			})
			w.mu.Lock()
			defer w.mu.Unlock()
			// The blocked jobs start at once, in either order.
			got := slices.Clone(w.order[1])
			slices.Sort(got[:min(tc.limit, len(got))])
			if want := []int64{0, 1, 2, 3, 4, 5}; !slices.Equal(got, want) {
				t.Errorf("started %v, want %v", w.order[1], want)
			}
			if n := countWhere(t, b.db, "run_limits", "attempts_made <> 1"); n != 0 {
				t.Errorf("%d jobs took more than one attempt: a change stopped a running job", n)
			}
		})
	}
}

// The Redis nodes forget every lock while a key run holds its key (a node restarted without its
// data): the database still shows the key at its limit, so no second run of it starts elsewhere.
func TestKeyRunHoldsItsKeyWhenRedisForgetsTheLock(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("run_forgotten")
	createKind(t, b.db, kind)
	enqueueSeq(t, b, kind, repeatKey(1, 30)...)
	w := newKeyWatch()
	forgotten := make(chan struct{})
	var once sync.Once
	for i := range 2 {
		cfg := b.cfg
		cfg.NodeName = fmt.Sprintf("node-%d", i)
		cfg.Concurrency = 4
		b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
			return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[postSync]) error {
				w.enter(j.Data.BlogID, j.Data.Seq)
				defer w.leave(j.Data.BlogID)
				if j.Data.Seq == 5 {
					once.Do(func() {
						for _, c := range b.redis.Clients {
							keys, err := c.Keys(ctx, b.redis.Prefix+"*").Result()
							if err == nil && len(keys) > 0 {
								err = c.Del(ctx, keys...).Err()
							}
							if err != nil {
								t.Error(err)
							}
						}
						close(forgotten)
					})
				}
				time.Sleep(5 * time.Millisecond)
				return nil
			})
		})
	}
	waitFor(t, "all processed", 30*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "run_forgotten", "processed_at IS NOT NULL") == 30, nil
	})
	<-forgotten
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.maxSeen[1] != 1 {
		t.Errorf("%d jobs of the key ran at once after Redis forgot its lock", w.maxSeen[1])
	}
	for i, seq := range w.order[1] {
		if seq != int64(i) {
			t.Fatalf("started in order %v", w.order[1])
		}
	}
}

// A run's finish that waits past the lock's validity (here the finished job's row is locked
// elsewhere for longer than the lease) keeps the lock renewed meanwhile, so the run goes on to its
// next job under it, on its first attempt, with nothing given back and no lease lost.
func TestKeyRunRenewsItsLockAfterASlowFinish(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("run_slow_finish")
	createKind(t, b.db, kind)
	enqueueSeq(t, b, kind, repeatKey(1, 2)...)
	held := make(chan error, 1)
	cfg := b.cfg
	cfg.LeaseTTL, cfg.HeartbeatInterval = time.Second, 300*time.Millisecond
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[postSync]) error {
			if j.Data.Seq != 0 {
				return nil
			}
			// Hold this job's row for 1.5 s from another transaction: its finish waits.
			tx, err := b.db.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "SELECT 1 FROM run_slow_finish WHERE seq = 0 FOR UPDATE"); err != nil {
				return err
			}
			go func() {
				time.Sleep(1500 * time.Millisecond)
				held <- tx.Commit(context.Background())
			}()
			return nil
		})
	})
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both processed", 10*time.Second, func() (bool, error) {
		return d.Stats().Processed == 2, nil
	})
	if n := countWhere(t, b.db, "run_slow_finish", "attempts_made <> 1"); n != 0 {
		t.Errorf("%d jobs took more than one attempt", n)
	}
	if s := d.Stats(); s.LeasesLost != 0 || s.Processed != 2 || s.RunClaimed != 1 || s.Released != 0 {
		t.Errorf("stats %+v: want 2 processed, the second by the run, none given back and no lease lost", s)
	}
}

// workSlotKeys enqueues jobs of kind over keys 0 to keys-1 in turn, works them with cfg through a
// handler that records them in the returned keyWatch and then calls then, and returns the
// dispatcher's stats once all are processed.
func workSlotKeys(t *testing.T, b *runBundle, kind *jobinfo.Kind[postSync], keys, jobs int, cfg dispatcher.Config, then func(postSync)) (dispatcher.Stats, *keyWatch) {
	t.Helper()
	createKind(t, b.db, kind)
	var order []int64
	for i := range jobs {
		order = append(order, int64(i%keys))
	}
	enqueueSeq(t, b, kind, order...)
	w := newKeyWatch()
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[postSync]) error {
			w.enter(j.Data.BlogID, j.Data.Seq)
			defer w.leave(j.Data.BlogID)
			then(j.Data)
			return nil
		})
	})
	waitFor(t, "all processed", 60*time.Second, func() (bool, error) {
		return d.Stats().Processed == int64(jobs), nil
	})
	return d.Stats(), w
}

// Many runs of keys with ten slots each, finishing in batches two statements at a time: every job
// is worked once and recorded, without a statement waiting on another's row locks (a finish that
// waited past the lease would leave its jobs to the rescue, as stale finishes) and without more
// than ten of a key at once.
func TestKeyRunsOfSlotKeys(t *testing.T) {
	t.Parallel()
	const keys, jobs = 50, 5000
	b := newRun(t)
	cfg := b.cfg
	// 500 workers finish in batches that wait for a database shared with the rest of the suite: the
	// lease must outlast a slow finish, or the rescuer takes jobs whose outcome is on its way.
	cfg.Concurrency, cfg.LeaseTTL, cfg.LeaderTTL = 500, 10*time.Second, 10*time.Second
	kind := jobinfo.MustDefine[postSync]("run_slot_keys", jobinfo.KeyLimit(10))
	s, w := workSlotKeys(t, b, kind, keys, jobs, cfg, func(j postSync) {
		if j.Seq%50 == 7 {
			time.Sleep(100 * time.Millisecond)
		}
	})
	if s.StaleFinishes != 0 || s.Rescued != 0 || s.LeasesLost != 0 || s.RunClaimed == 0 {
		t.Errorf("stats %+v: want no stale finish, rescue or lost lease, and jobs claimed by runs", s)
	}
	if n := countWhere(t, b.db, "run_slot_keys", "processed_at IS NOT NULL AND attempts_made = 1"); n != jobs {
		t.Errorf("%d of %d jobs processed on their first attempt", n, jobs)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, n := range w.maxSeen {
		if n > 10 {
			t.Errorf("key %d: %d jobs at once, over its 10 slots", k, n)
		}
	}
}

// Claim passes that add runs to keys that already run (ten keys of four slots, fast jobs, claims of
// one job a key) do not take those runs' next jobs from them: every slot starts one run, which
// lasts until its key has no job left, so claim passes claim no more jobs than there are slots.
// A pass that went without its pause, as a process starved by the package's other tests may, can
// end as many runs as it claims heads, each restarted by a later pass: the bound allows for those.
func TestClaimPassesLeaveRunningKeyRunsGoing(t *testing.T) {
	t.Parallel()
	const keys, limit, jobs = 10, 4, 4000
	b := newRun(t)
	cfg := b.cfg
	// Claims of one job a key: the keys reach their limit only through passes over keys that run.
	cfg.Concurrency, cfg.ClaimBatch, cfg.KeyRunJobs, cfg.KeyRunTime = keys*limit, keys, jobs, time.Hour
	cfg.LeaseTTL, cfg.LeaderTTL = 10*time.Second, 10*time.Second // see TestKeyRunsOfSlotKeys
	kind := jobinfo.MustDefine[postSync]("run_passes_leave_runs", jobinfo.KeyLimit(limit))
	s, w := workSlotKeys(t, b, kind, keys, jobs, cfg, func(postSync) {})
	most := keys*limit + keys*s.PausesMissed
	if passes := s.Claimed - s.RunClaimed; s.Claimed != jobs || passes > most {
		t.Errorf("claimed %d jobs, %d of them by claim passes; want %d, at most %d (one run per slot, and "+
			"%d for each of the %d passes without their pause)", s.Claimed, passes, jobs, most, keys, s.PausesMissed)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range int64(keys) {
		if len(w.order[k]) != jobs/keys || w.maxSeen[k] > limit {
			t.Errorf("key %d started %d jobs, up to %d at once; want %d, at most %d at once",
				k, len(w.order[k]), w.maxSeen[k], jobs/keys, limit)
		}
	}
}

// A claim pass that must pause the finish statements (its head's key runs a job) while one of them is
// stalled, here on a row lock the test holds, waits for it only so long, then goes on and claims its
// head: the pass is counted in Stats.PausesMissed, told to the PauseObserver and logged once at Info.
func TestClaimPassWithoutItsPauseIsCounted(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[postSync]("pause_missed", jobinfo.KeyLimit(2))
	createKind(t, b.db, kind)
	enqueueSeq(t, b, kind, 1, 2)
	logs := &logRecorder{}
	cfg := b.cfg
	rec := newRecorder()
	cfg.Concurrency, cfg.Logger, cfg.Observer = 4, logs.logger(), rec
	stalledStarted, rowLocked, releaseFirst := make(chan struct{}), make(chan struct{}), make(chan struct{})
	secondStarted := make(chan struct{})
	d := b.start(t, cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[postSync]) error {
			switch {
			case j.Data.BlogID == 1 && j.Data.Seq == 0:
				<-releaseFirst // keeps key 1 running, so a pass over key 1 must pause the finishes
			case j.Data.BlogID == 1:
				close(secondStarted)
			default:
				close(stalledStarted)
				<-rowLocked // its finish statement then waits for the test's row lock
			}
			return nil
		})
	})
	<-stalledStarted
	ctx := context.Background()
	tx, err := b.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var pid int
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid() FROM pause_missed WHERE blog_id = 2 FOR UPDATE").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	close(rowLocked)
	waitFor(t, "the finish statement to wait for the row lock", 10*time.Second, func() (bool, error) {
		var n int
		err := b.db.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", pid).Scan(&n)
		return n >= 1, err // a heartbeat of the job may wait for it too
	})
	if got := d.Stats().PausesMissed; got != 0 {
		t.Fatalf("Stats.PausesMissed = %d before any pass had to pause, want 0", got)
	}
	// Key 1's second job: a head whose key runs a job.
	if _, err := dispatcher.Enqueue(ctx, b.db, kind, postSync{BlogID: 1, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-secondStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("the pass did not start key 1's second job while a finish statement was stalled")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	close(releaseFirst)
	waitFor(t, "all processed", 10*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "pause_missed", "processed_at IS NOT NULL") == 3, nil
	})
	stopNow(t, d)
	if got, told := d.Stats().PausesMissed, rec.pausesMissed("pause_missed"); got != 1 || told != 1 {
		t.Errorf("Stats.PausesMissed = %d, the observer told %d times; want 1: the one pass over a running key "+
			"while a finish was stalled", got, told)
	}
	lines := logs.find(slog.LevelInfo, "dispatcher: claim passes went on without pausing")
	if len(lines) != 1 || lines[0]["kind"] != "pause_missed" || lines[0]["passes"] != "1" {
		t.Errorf("logged %v at Info about passes without their pause; want one line, kind pause_missed, passes 1", lines)
	}
}
