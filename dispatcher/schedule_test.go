package dispatcher_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/schedule"
)

func TestAddScheduleErrors(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("tick")
	other := jobinfo.MustDefine[plainJob]("tock")
	createKind(t, b.db, kind)
	d, err := dispatcher.New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := dispatcher.Register(d, kind, func(context.Context, *dispatcher.Job[plainJob]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	good := schedule.Spec{Name: "tick_every_second", Cron: "* * * * * *"}
	for _, tc := range []struct {
		name string
		add  func() error
		want string
	}{
		{"bad spec", func() error {
			return dispatcher.AddSchedule(d, kind, schedule.Spec{Name: "tick_bad", Cron: "* * * * * * * *"}, plainJob{})
		}, `dispatcher: AddSchedule: schedule: invalid cron spec "* * * * * * * *" of schedule "tick_bad": expected 5 to 6 fields, found 8`},
		{"kind not registered", func() error { return dispatcher.AddSchedule(d, other, good, plainJob{}) },
			`dispatcher: AddSchedule "tick_every_second": kind "tock" is not registered with this dispatcher: call Register first`},
		{"nil kind", func() error { return dispatcher.AddSchedule[plainJob](d, nil, good, plainJob{}) },
			`dispatcher: AddSchedule: kind is nil`},
		{"twice", func() error {
			if err := dispatcher.AddSchedule(d, kind, good, plainJob{N: 1}); err != nil {
				return err
			}
			return dispatcher.AddSchedule(d, kind, good, plainJob{N: 2})
		}, `dispatcher: AddSchedule "tick_every_second": a schedule of that name is added already`},
	} {
		if err := tc.add(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.want)
		}
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stopNow(t, d)
	if err := dispatcher.AddSchedule(d, kind, schedule.Spec{Name: "late", Cron: "@daily"}, plainJob{}); err == nil ||
		err.Error() != `dispatcher: AddSchedule "late": the dispatcher has started; add schedules before Start` {
		t.Errorf("after Start: %v", err)
	}
}

// firing is a row of jobpipe_schedule_firings with its job.
type firing struct {
	at, firedAt, processAfter time.Time
	jobID                     int64
	n                         int64
	note                      string
}

// firings returns the schedule's firings, ascending, each with its job from table.
func firings(t *testing.T, db *pgxpool.Pool, table, name string) []firing {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT f.instant, f.fired_at, f.job_id, j.process_after, j.n, j.note
		FROM jobpipe_schedule_firings f JOIN `+table+` j ON j.id = f.job_id WHERE f.name = $1 ORDER BY f.instant`, name)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (firing, error) {
		var f firing
		err := r.Scan(&f.at, &f.firedAt, &f.jobID, &f.processAfter, &f.n, &f.note)
		return f, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// consecutive fails the test unless fs are at consecutive seconds.
func consecutive(t *testing.T, fs []firing) {
	t.Helper()
	for i := 1; i < len(fs); i++ {
		if d := fs[i].at.Sub(fs[i-1].at); d != time.Second {
			t.Fatalf("firings %d and %d are %v apart: %s, %s", i-1, i, d, fs[i-1].at, fs[i].at)
		}
	}
}

// An every-second schedule fires each second, on time, one job per instant carrying the instant as its
// process_after and the schedule's data; the handler runs each.
func TestScheduleFiresEverySecond(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("tick")
	createKind(t, b.db, kind)
	ran := make(chan time.Time, 100)
	d := b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
		if err := dispatcher.Register(d, kind, func(_ context.Context, j *dispatcher.Job[plainJob]) error {
			ran <- *j.ProcessAfter
			return nil
		}); err != nil {
			return err
		}
		return dispatcher.AddSchedule(d, kind, schedule.Spec{Name: "tick", Cron: "* * * * * *"}, plainJob{N: 7, Note: "tick"})
	})
	var seen []time.Time
	for len(seen) < 4 {
		select {
		case at := <-ran:
			seen = append(seen, at)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d jobs ran in 10 s", len(seen))
		}
	}
	stopNow(t, d)
	fs := firings(t, b.db, "tick", "tick")
	if len(fs) < 4 {
		t.Fatalf("%d firings, want at least 4", len(fs))
	}
	consecutive(t, fs)
	for _, f := range fs {
		if !f.processAfter.Equal(f.at) || f.n != 7 || f.note != "tick" {
			t.Errorf("the job of %s: process_after %s, data %d %q", f.at, f.processAfter, f.n, f.note)
		}
		if lag := f.firedAt.Sub(f.at); lag < 0 || lag > time.Second {
			t.Errorf("the instant %s fired %v late", f.at, lag)
		}
	}
	for i, at := range seen {
		if !at.Equal(fs[i].at) {
			t.Errorf("job %d ran for %s, want %s", i, at, fs[i].at)
		}
	}
	st, err := schedule.Get(context.Background(), b.db, "tick")
	if err != nil {
		t.Fatal(err)
	}
	last := fs[len(fs)-1]
	if !st.NextRunAt.Equal(last.at.Add(time.Second)) || !st.LastRunAt.Equal(last.at) || *st.LastJobID != last.jobID ||
		string(st.Data) != `{"n": 7, "note": "tick"}` {
		t.Errorf("stored schedule: next %s, last %s job %d, data %s", st.NextRunAt, st.LastRunAt, *st.LastJobID, st.Data)
	}
	if s := d.Stats(); s.ScheduleFired != int64(len(fs)) || s.ScheduleSkipped != 0 {
		t.Errorf("Stats: fired %d, skipped %d; want %d, 0", s.ScheduleFired, s.ScheduleSkipped, len(fs))
	}
	if n := countWhere(t, b.db, "jobpipe_leaders", "name LIKE 'schedule:%'"); n != 0 {
		t.Errorf("%d schedule leases left after Stop", n)
	}
}

// A dispatcher that starts after every dispatcher was stopped for a minute continues from the stored
// next_run_at, as the catch-up policy says: all fires every missed second, last only the latest
// missed one, none none; then each second as usual. Nothing is skipped silently: Stats and the log
// count what the policy left out.
func TestScheduleCatchUpAfterAGap(t *testing.T) {
	t.Parallel()
	for _, c := range []schedule.CatchUp{schedule.CatchUpAll, schedule.CatchUpLast, schedule.CatchUpNone} {
		t.Run(string(c), func(t *testing.T) {
			t.Parallel()
			b := newRun(t)
			ctx := context.Background()
			kind := jobinfo.MustDefine[plainJob]("tick")
			createKind(t, b.db, kind)
			spec := schedule.Spec{Name: "tick", Cron: "* * * * * *", CatchUp: c, Grace: 2 * time.Second}
			// What the last dispatcher to run the schedule left: its next run a minute ago.
			if _, err := schedule.Save(ctx, b.db, "tick", schedule.MustParse(spec), nil); err != nil {
				t.Fatal(err)
			}
			var next0 time.Time
			if err := b.db.QueryRow(ctx, `UPDATE jobpipe_schedules SET next_run_at = date_trunc('second', now()) - interval '60 seconds'
				RETURNING next_run_at`).Scan(&next0); err != nil {
				t.Fatal(err)
			}
			d := b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
				if err := dispatcher.Register(d, kind, func(context.Context, *dispatcher.Job[plainJob]) error { return nil }); err != nil {
					return err
				}
				return dispatcher.AddSchedule(d, kind, spec, plainJob{N: 1})
			})
			waitFor(t, "two firings on time", 10*time.Second, func() (bool, error) {
				return countWhere(t, b.db, "jobpipe_schedule_firings", "fired_at - instant < interval '1 second'") >= 2, nil
			})
			stopNow(t, d)
			fs := firings(t, b.db, "tick", "tick")
			consecutive(t, fs)
			first := fs[0]
			skipped := int64(first.at.Sub(next0) / time.Second)
			switch c {
			case schedule.CatchUpAll:
				if skipped != 0 {
					t.Errorf("the first firing is %s, want next_run_at %s", first.at, next0)
				}
			case schedule.CatchUpLast:
				// The first firing is the latest missed instant: older than the grace when fired.
				if skipped < 50 || first.firedAt.Sub(first.at) <= spec.Grace {
					t.Errorf("the first firing %s, fired at %s: want the latest instant missed by more than the grace", first.at, first.firedAt)
				}
			case schedule.CatchUpNone:
				if skipped < 50 || first.firedAt.Sub(first.at) > spec.Grace {
					t.Errorf("the first firing %s, fired at %s: want the first instant within the grace", first.at, first.firedAt)
				}
			}
			if s := d.Stats(); s.ScheduleSkipped != skipped || s.ScheduleFired != int64(len(fs)) {
				t.Errorf("Stats: fired %d, skipped %d; want %d, %d", s.ScheduleFired, s.ScheduleSkipped, len(fs), skipped)
			}
		})
	}
}

// Report is a kind enqueued by a schedule.
type Report struct {
	Region string `jobpipe:"region"`
}

// A recurring job: the dispatcher leading the schedule enqueues the report every second (in a real
// application rather "0 3 * * *", at 03:00), with the instant as the job's process_after.
func ExampleAddSchedule() {
	ctx := context.Background()
	pool, _, drop, err := testenv.ExampleSchema(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer drop()
	reports := jobinfo.MustDefine[Report]("report")
	ddl, _ := reports.TableSpec().CreateSQL()
	if _, err := pool.Exec(ctx, ddl); err != nil {
		log.Fatal(err)
	}

	d, err := dispatcher.New(dispatcher.Config{DB: pool})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan string, 1)
	err = dispatcher.Register(d, reports, func(ctx context.Context, job *dispatcher.Job[Report]) error {
		select {
		case done <- fmt.Sprintf("report for %s, due on a whole second: %v", job.Data.Region, job.ProcessAfter.Nanosecond() == 0):
		default:
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	spec := schedule.Spec{Name: "eu_report", Cron: "* * * * * *", TimeZone: "Europe/Berlin", CatchUp: schedule.CatchUpLast}
	if err := dispatcher.AddSchedule(d, reports, spec, Report{Region: "eu"}); err != nil {
		log.Fatal(err)
	}
	if err := d.Start(ctx); err != nil { // stores the schedule in jobpipe_schedules
		log.Fatal(err)
	}
	fmt.Println(<-done)
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.Stop(stopCtx); err != nil {
		log.Fatal(err)
	}
	list, _ := schedule.List(ctx, pool)
	fmt.Println(list[0].Name, list[0].Kind, list[0].Cron, list[0].TimeZone, list[0].CatchUp, string(list[0].Data))
	// Output:
	// report for eu, due on a whole second: true
	// eu_report report * * * * * * Europe/Berlin last {"region": "eu"}
}
