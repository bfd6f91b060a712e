package bench

import (
	"strings"
	"testing"
	"time"
)

func TestParseRedisCPU(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.750500\r\nused_cpu_sys_children:9.000000\r\n" +
		"used_cpu_user_children:9.000000\r\nused_cpu_sys_main_thread:1.000000\r\nused_cpu_user_main_thread:0.500000\r\n"
	got, err := parseRedisCPU(info)
	if want := 2000500 * time.Microsecond; err != nil || got != want {
		t.Errorf("parseRedisCPU = %v, %v; want %v (used_cpu_sys + used_cpu_user only)", got, err, want)
	}
	for _, tc := range []struct{ info, err string }{
		{"# CPU\r\nused_cpu_sys:1.0\r\n", "found 1 of them"},
		{"# CPU\r\nused_cpu_sys:x\r\nused_cpu_user:1\r\n", `used_cpu_sys "x": not a number`},
		{"", "found 0 of them"},
	} {
		if _, err := parseRedisCPU(tc.info); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("parseRedisCPU(%q) error %v; want one containing %q", tc.info, err, tc.err)
		}
	}
}

func TestWorkCostResultAndTable(t *testing.T) {
	c := workCost{jobs: 1000, keyed: true, statements: 250, redisTrips: 40, redis: 13 * time.Millisecond,
		cpu: cpuWindow{Elapsed: time.Second, Self: 64 * time.Millisecond, PG: 46 * time.Millisecond, Machine: 130 * time.Millisecond}}
	r := newReport("unique")
	c.resultPairs(r)
	want := "RESULT worker_cpu_us_per_job=64 pg_cpu_us_per_job=46 redis_cpu_us_per_job=13 machine_cpu_us_per_job=130 " +
		"statements_per_job=0.25 redis_trips_per_job=0.04"
	if got := r.ResultLine(); got != want {
		t.Errorf("ResultLine:\n got %s\nwant %s", got, want)
	}
	// Where the CPU time could not be read, the RESULT line keeps the round trips and the table says why.
	c.missing, c.keyed = "the server is not a process of this machine", false
	r = newReport("drain")
	c.resultPairs(r)
	if got, want := r.ResultLine(), "RESULT statements_per_job=0.25"; got != want {
		t.Errorf("ResultLine without CPU: got %s, want %s", got, want)
	}
	tab := c.table()
	if len(tab.Rows) != 2 || tab.Rows[0][1] != "not measured" || tab.Rows[0][2] != c.missing {
		t.Errorf("table without CPU: %v", tab.Rows)
	}
}
