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
		o.schema != "river_bench" || o.databaseURL != defaultDatabaseURL {
		t.Errorf("parse: %+v, %v", o, err)
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
		{[]string{"unique"}, `unknown scenario "unique": want drain or steady`},
		{[]string{"drain", "steady"}, "too many arguments"},
		{[]string{"drain", "--jobs", "0"}, "--jobs must be from 1 to"},
		{[]string{"steady", "--duration", "0s"}, "--duration and --timeout must be positive"},
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
