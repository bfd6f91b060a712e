package schedule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/schedule"
)

// A spec in a zone: the next runs of a job at 02:30 in Berlin, across the night the clocks spring
// forward (02:30 does not exist on 31 March 2024: it runs at the change, 03:00).
func ExampleParse() {
	s, err := schedule.Parse(schedule.Spec{Name: "nightly", Cron: "30 2 * * *", TimeZone: "Europe/Berlin"})
	if err != nil {
		log.Fatal(err)
	}
	t := time.Date(2024, 3, 29, 12, 0, 0, 0, time.UTC)
	for range 3 {
		t = s.Next(t)
		fmt.Println(t.Format("2006-01-02 15:04 MST"))
	}
	_, err = schedule.Parse(schedule.Spec{Name: "nightly", Cron: "30 2 * *"})
	fmt.Println(err)
	// Output:
	// 2024-03-30 02:30 CET
	// 2024-03-31 03:00 CEST
	// 2024-04-01 02:30 CEST
	// schedule: invalid cron spec "30 2 * *" of schedule "nightly": expected 5 to 6 fields, found 4: [30 2 * *]; write 5 fields "minute hour day-of-month month day-of-week" (e.g. "30 3 * * *" for 03:30 every day), 6 with seconds first (e.g. "*/10 * * * * *" for every 10 seconds), or a descriptor (e.g. "@daily", "@every 15m")
}

// What a leader fires after every dispatcher was down from 10:00 to 10:04:40, for a job every minute,
// under each catch-up policy (grace 30 s).
func ExampleSchedule_Plan() {
	next := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	now := next.Add(4*time.Minute + 40*time.Second)
	for _, c := range []schedule.CatchUp{schedule.CatchUpAll, schedule.CatchUpLast, schedule.CatchUpNone} {
		s := schedule.MustParse(schedule.Spec{Name: "minutely", Cron: "* * * * *", CatchUp: c})
		p := s.Plan(next, now, 0)
		var fire []string
		for _, t := range p.Fire {
			fire = append(fire, t.Format("15:04"))
		}
		fmt.Printf("%-4s fire %v, skip %d, next %s\n", c, fire, p.Skipped, p.Next.Format("15:04"))
	}
	// Output:
	// all  fire [10:00 10:01 10:02 10:03 10:04], skip 0, next 10:05
	// last fire [10:04], skip 4, next 10:05
	// none fire [], skip 5, next 10:05
}

// Store a schedule (a dispatcher does so at Start) and list what is stored, as `jobpipe cron list`
// shows it.
func ExampleList() {
	ctx := context.Background()
	pool, _, drop, err := testenv.ExampleSchema(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer drop()
	if _, err := pool.Exec(ctx, `INSERT INTO jobpipe_kinds (name, table_name) VALUES ('report', 'report')`); err != nil {
		log.Fatal(err)
	}
	s := schedule.MustParse(schedule.Spec{Name: "nightly_report", Cron: "CRON_TZ=Europe/Berlin 0 3 * * *", CatchUp: schedule.CatchUpAll})
	if _, err := schedule.Save(ctx, pool, "report", s, json.RawMessage(`{"region": "eu"}`)); err != nil {
		log.Fatal(err)
	}
	list, err := schedule.List(ctx, pool)
	if err != nil {
		log.Fatal(err)
	}
	for _, st := range list {
		fmt.Printf("%s: kind %s, %q in %s, catch-up %s, data %s, next run at 03:00 local: %v\n", st.Name, st.Kind, st.Cron,
			st.TimeZone, st.CatchUp, st.Data, st.NextRunAt.In(s.Location()).Format("15:04") == "03:00")
	}
	// Output:
	// nightly_report: kind report, "0 3 * * *" in Europe/Berlin, catch-up all, data {"region": "eu"}, next run at 03:00 local: true
}
