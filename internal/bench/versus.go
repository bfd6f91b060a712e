package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// rateScenarios are the scenarios whose RESULT line has jobs_per_s: the ones --vs can compare.
var rateScenarios = map[string]bool{"drain": true, "steady": true, "unique": true, "slots": true}

// RateScenarios lists the scenarios that report jobs_per_s, sorted: the values --vs takes, and the
// scenarios it can follow.
func RateScenarios() []string { return slices.Sorted(maps.Keys(rateScenarios)) }

// ValidateVersus checks that scenario's rate can be compared with vs's, naming the --vs flag.
func ValidateVersus(scenario, vs string) error {
	names := strings.Join(RateScenarios(), ", ")
	switch {
	case !rateScenarios[vs]:
		return fmt.Errorf("--vs %q: want one of %s (the scenarios that report jobs_per_s)", vs, names)
	case scenario == "rate":
		// rate's jobs_per_s is the load it offers, not a throughput.
		return fmt.Errorf("--vs compares throughput, and rate runs at the fixed --rate: use it after one of %s", names)
	case !rateScenarios[scenario]:
		return fmt.Errorf("--vs compares jobs_per_s, which %s does not report: use it after one of %s", scenario, names)
	}
	return nil
}

// VersusOptions returns the options of the run that --vs compares with: the command line's options o
// (before defaults, so each scenario takes its own defaults, as its own command would) with the
// scenario vs, and the job count the first run reported, so that both work the same number of jobs.
// Both runs use o's schema; an unset one is each scenario's default.
func VersusOptions(o Options, first *Report, vs string) Options {
	o.Scenario = vs
	if jobs, ok := first.Value("jobs"); ok {
		if n, ok := jobs.(int64); ok && n > 0 {
			o.Jobs = int(n)
		}
	}
	return o
}

// Value returns the value of the RESULT pair key.
func (r *Report) Value(key string) (any, bool) {
	for _, p := range r.Result {
		if p.Key == key {
			return p.Value, true
		}
	}
	return nil, false
}

// JobsPerSecond returns the run's jobs_per_s.
func (r *Report) JobsPerSecond() (float64, bool) {
	v, ok := r.Value("jobs_per_s")
	f, isFloat := v.(float64)
	return f, ok && isFloat
}

// ratioCeiling is the highest ratio r's scenario could reach against a rate of theirs, when r
// reports a least work time (slots' slow_bound_s): its jobs done in that time.
func (r *Report) ratioCeiling(theirs float64) (float64, bool) {
	bound, ok := r.Value("slow_bound_s")
	seconds, isFloat := bound.(float64)
	jobs, hasJobs := r.Value("jobs")
	n, isInt := jobs.(int64)
	if !ok || !isFloat || seconds <= 0 || !hasJobs || !isInt {
		return 0, false
	}
	return ratio(float64(n)/seconds, theirs), true
}

// Versus appends to r's RESULT line the comparison with other, run on the same job count: vs (its
// scenario), vs_jobs_per_s (its rate) and ratio (r's rate over other's, three decimals), and for a
// run with a least work time the ratio_ceiling it could reach (see ratioCeiling). other's
// result is kept in the JSON report's details; its own RESULT line says whether its accounting held.
func (r *Report) Versus(other *Report) error {
	mine, ok := r.JobsPerSecond()
	if !ok {
		return fmt.Errorf("--vs: %s reported no jobs_per_s", r.Scenario)
	}
	theirs, ok := other.JobsPerSecond()
	if !ok {
		return fmt.Errorf("--vs: %s reported no jobs_per_s", other.Scenario)
	}
	r.result("vs", other.Scenario)
	r.result("vs_jobs_per_s", theirs)
	r.result("ratio", ratio(mine, theirs))
	if ceiling, ok := r.ratioCeiling(theirs); ok {
		r.result("ratio_ceiling", ceiling)
	}
	r.Details["vs"] = map[string]any{"scenario": other.Scenario, "result": pairs(other.Result),
		"settings": pairs(other.Settings), "failures": append([]string{}, other.Failures...)}
	return nil
}

// ratio is a over b with three decimals; 0 when b is 0 (a run that did nothing has no rate to divide by).
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round(a/b, 3)
}
