package bench

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	// A name with spaces and parentheses: the fields count from the last ')'.
	line := "4242 (post gres) (x)) S 1 4242 4242 0 -1 4194560 500 0 0 0 1234 567 0 0 20 0 1 0 98765 1000000 300 18446744073709551615 0\n"
	got, err := parseProcStat([]byte(line))
	if err != nil || got != (procTimes{comm: "post gres) (x)", cpu: 1234 + 567, start: 98765}) {
		t.Errorf("parseProcStat = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "4242 postgres S 1", "4242 (postgres) S 1 2 3", "4242 (p) S 1 2 3 4 5 6 7 8 9 10 x 12 13 14 15 16 17 18 19 20"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q): no error", bad)
		}
	}
	self, err := readProcTimes("self")
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if self.comm == "" || self.start <= 0 {
		t.Errorf("/proc/self/stat: %+v", self)
	}
}

func TestParseMachineStat(t *testing.T) {
	t.Parallel()
	data := "cpu  100 5 50 1000 20 3 2 1 7 0\ncpu0 50 2 25 500 10 1 1 0 0 0\nintr 1 2\nbtime 1700000000\nprocesses 9\n"
	got, err := parseMachineStat([]byte(data))
	if err != nil || got != (machineTimes{busy: 100 + 5 + 50 + 3 + 2 + 1, all: 161 + 1000 + 20, boot: 1700000000}) {
		t.Errorf("parseMachineStat = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "cpu 1 2 3 4 5 6 7 8\n", "btime 5\n", "cpu  1 2 3 x 5 6 7 8\nbtime 5\n"} {
		if _, err := parseMachineStat([]byte(bad)); err == nil {
			t.Errorf("parseMachineStat(%q): no error", bad)
		}
	}
}

func TestClockTicks(t *testing.T) {
	t.Parallel()
	word := strconv.IntSize / 8
	vec := make([]byte, 6*word)
	put := func(i int, v uint64) {
		if word == 4 {
			binary.NativeEndian.PutUint32(vec[i*word:], uint32(v))
		} else {
			binary.NativeEndian.PutUint64(vec[i*word:], v)
		}
	}
	put(0, 6) // AT_PAGESZ
	put(1, 4096)
	put(2, atClkTck)
	put(3, 250)
	if hz := auxvValue(vec, atClkTck); hz != 250 {
		t.Errorf("auxvValue(AT_CLKTCK) = %d, want 250", hz)
	}
	if v := auxvValue(vec, 99); v != 0 {
		t.Errorf("auxvValue of an absent key = %d, want 0", v) // it stops at AT_NULL
	}
	if _, err := os.Stat("/proc/self/auxv"); err == nil {
		if hz := clockTicks(); hz < 1 || hz > 10_000 {
			t.Errorf("clockTicks() = %d", hz)
		}
	}
	if d := ticksToDuration(250, 100); d != 2500*time.Millisecond {
		t.Errorf("ticksToDuration(250, 100) = %v", d)
	}
}

func TestRateOptions(t *testing.T) {
	t.Parallel()
	o := Options{Scenario: "rate"}.withDefaults()
	if o.Rate != 600 || o.Duration != 5*time.Minute || o.Workers != 32 || o.Handler != time.Millisecond ||
		o.Schema != "jobpipe_bench_rate" || len(o.Dispatchers) != 1 {
		t.Errorf("rate defaults: %+v", o)
	}
	if n := latencyJobs(o.Rate, o.Duration); n != 180_000 {
		t.Errorf("rate's default jobs: %d, want 180000", n)
	}
	if c := latencyCallers(o.Rate); c != 24 {
		t.Errorf("rate's default callers: %d, want 24", c)
	}
	if err := (Options{Scenario: "rate", Rate: 10, Duration: time.Millisecond}).withDefaults().Validate(); err == nil ||
		!strings.Contains(err.Error(), "--rate times --duration must come to 1 to") {
		t.Errorf("Validate: %v", err)
	}
	if len(ratePayload) != ratePayloadBytes || len(newRateJob(7).Payload) != 256 || newRateJob(7).N != 7 {
		t.Errorf("payload of %d bytes", len(ratePayload))
	}
	if err := ValidateVersus("rate", "drain"); err == nil || !strings.Contains(err.Error(), "rate runs at the fixed --rate") {
		t.Errorf("ValidateVersus(rate, drain) = %v", err)
	}
	if perJob(3*time.Second, 2000) != 1500 || perJob(time.Second, 0) != 0 || share(time.Second, 4*time.Second) != 25 {
		t.Error("perJob or share")
	}
}
