package schedule_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/migrations"
	"github.com/jobpipe/jobpipe/schedule"
)

// setup gives a test a migrated schema with kind "report" registered and a table fired_jobs that
// enqueue writes to.
func setup(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	s := testenv.NewSchema(t)
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `INSERT INTO jobpipe_kinds (name, table_name) VALUES ('report', 'report');
		CREATE TABLE fired_jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at timestamptz NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return s.Pool
}

func enqueue(ctx context.Context, tx pgx.Tx, at time.Time) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO fired_jobs (at) VALUES ($1) RETURNING id`, at).Scan(&id)
	return id, err
}

func save(t *testing.T, db *pgxpool.Pool, spec schedule.Spec, data string) schedule.Saved {
	t.Helper()
	var raw json.RawMessage
	if data != "" {
		raw = json.RawMessage(data)
	}
	saved, err := schedule.Save(context.Background(), db, "report", schedule.MustParse(spec), raw)
	if err != nil {
		t.Fatal(err)
	}
	return saved
}

// Saving again keeps next_run_at unless the expression or zone changed.
func TestScheduleSave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := setup(t)
	spec := schedule.Spec{Name: "nightly", Cron: "0 3 * * *", TimeZone: "Europe/Berlin"}
	first := save(t, db, spec, `{"region": "eu"}`)
	if !first.Created || !first.Changed || first.Rescheduled {
		t.Fatalf("first save: %+v", first)
	}
	// A restart in a week stands where the schedule stood: pretend it has not fired for a while.
	past := first.NextRunAt.AddDate(0, 0, -7)
	if _, err := db.Exec(ctx, `UPDATE jobpipe_schedules SET next_run_at = $1`, past); err != nil {
		t.Fatal(err)
	}
	if again := save(t, db, spec, `{"region":"eu"}`); again.Created || again.Changed || again.Rescheduled || !again.NextRunAt.Equal(past) {
		t.Errorf("same definition again: %+v; want unchanged, next %s", again, past)
	}
	spec.CatchUp = schedule.CatchUpAll
	if policy := save(t, db, spec, `{"region": "us"}`); !policy.Changed || policy.Rescheduled || !policy.NextRunAt.Equal(past) {
		t.Errorf("new policy and data: %+v; want changed, next kept at %s", policy, past)
	}
	spec.Cron = "CRON_TZ=Europe/Berlin 0 4 * * *"
	spec.TimeZone = ""
	moved := save(t, db, spec, `{"region": "us"}`)
	if !moved.Changed || !moved.Rescheduled || !moved.NextRunAt.After(time.Now().Add(-time.Minute)) {
		t.Errorf("new expression: %+v; want rescheduled from now", moved)
	}
	if h, m, _ := moved.NextRunAt.In(schedule.MustParse(spec).Location()).Clock(); h != 4 || m != 0 {
		t.Errorf("next run %s is not 04:00 in Berlin", moved.NextRunAt)
	}

	got, err := schedule.Get(ctx, db, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "nightly" || got.Kind != "report" || got.Cron != "0 4 * * *" || got.TimeZone != "Europe/Berlin" ||
		got.CatchUp != schedule.CatchUpAll || got.Grace != schedule.DefaultGrace || string(got.Data) != `{"region": "us"}` ||
		!got.NextRunAt.Equal(moved.NextRunAt) || got.LastRunAt != nil || got.LastJobID != nil {
		t.Errorf("stored: %+v", got)
	}
	if _, err := schedule.Parse(got.Spec()); err != nil {
		t.Errorf("the stored spec does not parse: %v", err)
	}
}

func TestScheduleSaveUnknownKind(t *testing.T) {
	t.Parallel()
	db := setup(t)
	_, err := schedule.Save(context.Background(), db, "nope", schedule.MustParse(schedule.Spec{Name: "x", Cron: "@daily"}), nil)
	const want = `schedule: save "x": kind "nope" is not in jobpipe_kinds: register the kind (a dispatcher does at Start) before its schedules: `
	if err == nil || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Errorf("error %v, want it to start %q", err, want)
	}
}

func TestScheduleListGetDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := setup(t)
	save(t, db, schedule.Spec{Name: "b_hourly", Cron: "@hourly", CatchUp: schedule.CatchUpNone, Grace: time.Minute}, "")
	save(t, db, schedule.Spec{Name: "a_nightly", Cron: "0 3 * * *"}, `{"n": 1}`)
	list, err := schedule.List(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name+" "+s.Cron+" "+string(s.CatchUp)+" "+s.Grace.String()+" "+string(s.Data))
	}
	if want := []string{"a_nightly 0 3 * * * last 30s {\"n\": 1}", "b_hourly @hourly none 1m0s "}; !slices.Equal(names, want) {
		t.Errorf("List: %q, want %q", names, want)
	}
	if err := schedule.Delete(ctx, db, "b_hourly"); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{schedule.Delete(ctx, db, "b_hourly"), func() error { _, err := schedule.Get(ctx, db, "b_hourly"); return err }()} {
		if !errors.Is(err, schedule.ErrNotFound) ||
			err.Error() != `schedule: not found: no schedule "b_hourly" in jobpipe_schedules (a dispatcher stores its schedules when it starts)` {
			t.Errorf("after Delete: %v", err)
		}
	}
}

// firingRows returns the schedule's firings as instant → job id.
func firingRows(t *testing.T, db *pgxpool.Pool, name string) map[time.Time]int64 {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT instant, job_id FROM jobpipe_schedule_firings WHERE name = $1`, name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[time.Time]int64{}
	var at time.Time
	var id int64
	if _, err := pgx.ForEachRow(rows, []any{&at, &id}, func() error { out[at.UTC()] = id; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// jobRows returns fired_jobs as id → instant.
func jobRows(t *testing.T, db *pgxpool.Pool) map[int64]time.Time {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT id, at FROM fired_jobs`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]time.Time{}
	var at time.Time
	var id int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &at}, func() error { out[id] = at.UTC(); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// After a gap (every dispatcher stopped), the next round fires what the policy says, from the
// persisted next_run_at: exactly those instants get a job and a firing, and next_run_at moves past now.
func TestScheduleFireAfterAGap(t *testing.T) {
	t.Parallel()
	for _, c := range []schedule.CatchUp{schedule.CatchUpAll, schedule.CatchUpLast, schedule.CatchUpNone} {
		t.Run(string(c), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := setup(t)
			spec := schedule.Spec{Name: "tick", Cron: "* * * * * *", CatchUp: c, Grace: 2 * time.Second}
			save(t, db, spec, "")
			var next time.Time
			if err := db.QueryRow(ctx, `UPDATE jobpipe_schedules SET next_run_at = date_trunc('second', now()) - interval '10 seconds'
				RETURNING next_run_at`).Scan(&next); err != nil {
				t.Fatal(err)
			}
			r, err := schedule.Fire(ctx, db, "tick", 0, enqueue)
			if err != nil {
				t.Fatal(err)
			}
			// What the policy keeps, from the round's time.
			want := schedule.MustParse(spec).Plan(next, r.Now, 0)
			if len(want.Fire) == 0 || (c == schedule.CatchUpAll) != (want.Skipped == 0) {
				t.Fatalf("the test's plan is degenerate: %+v", want)
			}
			firings, jobs := firingRows(t, db, "tick"), jobRows(t, db)
			if len(r.Fired) != len(want.Fire) || len(firings) != len(want.Fire) || len(jobs) != len(want.Fire) {
				t.Fatalf("fired %d, %d firing rows, %d jobs; want %d each", len(r.Fired), len(firings), len(jobs), len(want.Fire))
			}
			for i, at := range want.Fire {
				f := r.Fired[i]
				if !f.At.Equal(at) || firings[at.UTC()] != f.JobID || !jobs[f.JobID].Equal(at) {
					t.Errorf("instant %s: fired %+v, firing row job %d, job's instant %s", at, f, firings[at.UTC()], jobs[f.JobID])
				}
			}
			got, err := schedule.Get(ctx, db, "tick")
			if err != nil {
				t.Fatal(err)
			}
			last := r.Fired[len(r.Fired)-1]
			if !got.NextRunAt.Equal(want.Next) || !got.NextRunAt.After(r.Now) || got.LastRunAt == nil || !got.LastRunAt.Equal(last.At) ||
				got.LastJobID == nil || *got.LastJobID != last.JobID {
				t.Errorf("schedule after the round: next %s, last %v job %v; want next %s, last %+v", got.NextRunAt, got.LastRunAt, got.LastJobID, want.Next, last)
			}
		})
	}
}

// Rounds run at the same moment take turns on the schedule's row: every instant fires once. And an
// instant recorded as fired is not fired again even if next_run_at is moved back over it.
func TestScheduleFireNeverTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := setup(t)
	save(t, db, schedule.Spec{Name: "tick", Cron: "* * * * * *", CatchUp: schedule.CatchUpAll}, "")
	if _, err := db.Exec(ctx, `UPDATE jobpipe_schedules SET next_run_at = date_trunc('second', now()) - interval '40 seconds'`); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var fired []time.Time
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			r, err := schedule.Fire(ctx, db, "tick", 3, enqueue)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, f := range r.Fired {
				fired = append(fired, f.At)
			}
		})
	}
	wg.Wait()
	firings, jobs := firingRows(t, db, "tick"), jobRows(t, db)
	if len(fired) != 24 || len(firings) != 24 || len(jobs) != 24 {
		t.Fatalf("8 rounds of 3: fired %d, %d firings, %d jobs; want 24 each", len(fired), len(firings), len(jobs))
	}
	slices.SortFunc(fired, time.Time.Compare)
	for i := 1; i < len(fired); i++ {
		if fired[i].Sub(fired[i-1]) != time.Second {
			t.Fatalf("fired instants are not consecutive seconds: %v", fmtTimes(fired))
		}
	}

	if _, err := db.Exec(ctx, `UPDATE jobpipe_schedules SET next_run_at = $1`, fired[0]); err != nil {
		t.Fatal(err)
	}
	r, err := schedule.Fire(ctx, db, "tick", 0, enqueue)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Fired) == 0 || !r.Fired[0].At.After(fired[len(fired)-1]) {
		t.Errorf("after moving next_run_at back, the round fired %v: it should start after %s", r.Fired, fired[len(fired)-1])
	}
	if n := len(jobRows(t, db)); n != 24+len(r.Fired) {
		t.Errorf("%d jobs, want %d", n, 24+len(r.Fired))
	}
}

func TestScheduleFireUnknown(t *testing.T) {
	t.Parallel()
	db := setup(t)
	if _, err := schedule.Fire(context.Background(), db, "nope", 0, enqueue); !errors.Is(err, schedule.ErrNotFound) {
		t.Errorf("Fire of an unknown schedule: %v", err)
	}
}
