package main

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	env := func(string) string { return "" }
	o, err := parse([]string{"steady", "--duration", "10s", "--backlog", "500"}, env)
	if err != nil || o.scenario != "steady" || o.duration != 10*time.Second || o.backlog != 500 || o.jobs != 1_000_000 ||
		o.schema != "river_bench" || o.databaseURL != defaultDatabaseURL || o.workers != 2000 || o.fetchCooldown != 2*time.Millisecond {
		t.Errorf("parse: %+v, %v", o, err)
	}
	// Each scenario's own defaults: steady's window, rate's load and River's low-latency cooldown.
	o, err = parse([]string{"steady"}, env)
	if err != nil || o.duration != 60*time.Second || o.workers != 2000 {
		t.Errorf("parse steady: %+v, %v", o, err)
	}
	o, err = parse([]string{"rate"}, env)
	if err != nil || o.scenario != "rate" || o.rate != 600 || o.duration != 5*time.Minute || o.workers != 32 ||
		o.handler != time.Millisecond || o.fetchCooldown != time.Millisecond {
		t.Errorf("parse rate: %+v, %v", o, err)
	}
	o, err = parse([]string{"rate", "--rate", "100", "--duration", "3s", "--workers", "8", "--handler", "2ms", "--fetch-cooldown", "5ms"}, env)
	if err != nil || o.rate != 100 || o.duration != 3*time.Second || o.workers != 8 || o.handler != 2*time.Millisecond ||
		o.fetchCooldown != 5*time.Millisecond {
		t.Errorf("parse rate with flags: %+v, %v", o, err)
	}
	o, err = parse([]string{"--workers", "50", "drain", "--fetch-cooldown", "10ms"}, env)
	if err != nil || o.workers != 50 || o.fetchCooldown != 10*time.Millisecond {
		t.Errorf("parse drain with flags: %+v, %v", o, err)
	}
	o, err = parse([]string{"--jobs", "50000", "drain", "--progress", "0"}, func(string) string { return "postgres://db/x" })
	if err != nil || o.scenario != "drain" || o.jobs != 50_000 || o.progress >= 0 || o.databaseURL != "postgres://db/x" {
		t.Errorf("parse: %+v, %v", o, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "missing the scenario"},
		{[]string{"unique"}, `unknown scenario "unique": want drain, steady or rate`},
		{[]string{"rate", "--rate", "0"}, "--rate must be from 1 to 100000 jobs/s, not 0"},
		{[]string{"rate", "--rate", "200000"}, "--rate must be from 1 to 100000 jobs/s, not 200000"},
		{[]string{"rate", "--rate", "10", "--duration", "1ms"}, "--rate times --duration must come to 1 to"},
		{[]string{"rate", "--duration", "0s"}, "--duration, --timeout and --handler must be positive"},
		{[]string{"rate", "--handler", "-1ms"}, "--duration, --timeout and --handler must be positive"},
		{[]string{"rate", "--workers", "0"}, "--workers must be from 1 to 10000, not 0"},
		{[]string{"rate", "--fetch-cooldown", "500us"}, "--fetch-cooldown must be at least 1ms (River's minimum), not 500µs"},
		{[]string{"drain", "--fetch-cooldown", "0s"}, "--fetch-cooldown must be at least 1ms"},
		{[]string{"drain", "steady"}, "too many arguments"},
		{[]string{"drain", "--jobs", "0"}, "--jobs must be from 1 to"},
		{[]string{"steady", "--duration", "0s"}, "--duration, --timeout and --handler must be positive"},
		{[]string{"drain", "--schema", "river;drop"}, `--schema "river;drop"`},
		{[]string{"drain", "--nosuch"}, "flag provided but not defined: -nosuch"},
	} {
		_, err := parse(tc.args, env)
		if _, ok := err.(*usageError); !ok || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse(%q) = %v; want a usage error with %q", tc.args, err, tc.want)
		}
	}
}

func TestReportPrintsResultLast(t *testing.T) {
	r := &report{}
	r.setting("max_workers", 2000)
	r.result("scenario", "drain")
	r.result("peer", "river")
	r.result("jobs_per_s", rate(50_000, 2*time.Second))
	r.result("seconds", round(2.004, 2))
	var b strings.Builder
	r.print(&b)
	if !strings.HasSuffix(b.String(), "\nRESULT scenario=drain peer=river jobs_per_s=25000 seconds=2\n") || !strings.Contains(b.String(), "max_workers") {
		t.Errorf("printed:\n%s", b.String())
	}
}
