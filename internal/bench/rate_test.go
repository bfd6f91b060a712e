package bench

import (
	"strings"
	"testing"
	"time"
)

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
