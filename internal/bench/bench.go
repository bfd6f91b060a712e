package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"runtime/debug"
	"slices"
	"time"
)

// scenario runs one benchmark in an open session and fills its report.
type scenario func(ctx context.Context, s *session) error

var scenarios = map[string]scenario{
	"drain":   runDrain,
	"steady":  runSteady,
	"unique":  runUnique,
	"slots":   runSlots,
	"fair":    runFair,
	"herd":    runHerd,
	"select":  runSelect,
	"latency": runLatency,
	"rate":    runRate,
	"memory":  runMemory,
}

// redisScenarios are the scenarios of keyed kinds, whose dispatchers need the lock nodes.
var redisScenarios = map[string]bool{"unique": true, "slots": true, "fair": true}

// Scenarios lists the scenario names, sorted.
func Scenarios() []string { return slices.Sorted(maps.Keys(scenarios)) }

// Normalize returns o with every zero field set to its scenario's default.
func Normalize(o Options) Options { return o.withDefaults() }

// Run runs the scenario o names and returns its report. The error is for a run that could not
// finish (the database is unreachable, it was interrupted); a finished run whose accounting found
// a problem returns a report that Failed. The run's schema is dropped at the end unless o.Keep, and
// spawned Redis nodes are killed, whatever happens.
func Run(ctx context.Context, o Options) (*Report, error) {
	o = o.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Out == nil || o.Log == nil || o.DB == nil {
		return nil, errors.New("bench: Options.Out, Log and DB must be set")
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if ownDatabase[o.Scenario] {
		cfg, drop, err := createDatabase(ctx, o.DB, o.Schema, o.Keep, o.Log)
		if err != nil {
			return nil, err
		}
		defer drop(ctx) // after the session's close, deferred below
		o.DB = cfg
	}
	r := newReport(o.Scenario)
	s, err := open(ctx, o, r)
	if err != nil {
		return nil, err
	}
	defer s.close(ctx)
	if redisScenarios[o.Scenario] {
		if err := s.connectRedis(ctx); err != nil {
			return nil, err
		}
	} else if o.SpawnRedis > 0 {
		fmt.Fprintf(o.Log, "bench: --spawn-redis ignored: %s does not use Redis\n", o.Scenario)
	}
	s.settings(ctx)
	if err := scenarios[o.Scenario](ctx, s); err != nil {
		return nil, fmt.Errorf("bench %s: %w", o.Scenario, err)
	}
	r.result("verified", !r.Failed())
	return r, nil
}

// settings records what the numbers depend on.
func (s *session) settings(ctx context.Context) {
	o, r := s.opts, s.report
	r.setting("date", r.Started.UTC().Format(time.RFC3339))
	r.setting("commit", vcsRevision())
	r.setting("go", runtime.Version())
	r.setting("cpus", runtime.NumCPU())
	r.setting("schema", o.Schema)
	for _, name := range []string{"server_version", "shared_buffers", "synchronous_commit", "fsync", "autovacuum", "max_connections"} {
		var v string
		if err := s.db.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err == nil {
			r.setting("pg_"+name, v)
		}
	}
	if s.redis != nil {
		r.setting("redis_nodes", len(s.redis.nodes))
		r.setting("redis_spawned", len(s.redis.procs) > 0)
	}
	r.setting("workers_per_dispatcher", o.Workers)
	r.setting("claim_batch", o.ClaimBatch)
	if o.KeyRunJobs > 0 {
		r.setting("key_run_jobs", o.KeyRunJobs)
	}
	if o.KeyRunTime > 0 {
		r.setting("key_run_time", o.KeyRunTime.String())
	}
	r.setting("pool_per_dispatcher", o.Pool)
	r.setting("enqueue_batch", o.Batch)
	r.setting("analyze_after_load", !o.NoAnalyze)
	switch o.Scenario {
	case "slots":
		r.setting("key_limit", o.KeyLimit)
		r.setting("slow_fraction", o.SlowFraction)
		r.setting("slow_handler", o.Slow.String())
		r.setting("slow_run", o.SlowRun)
	case "fair":
		r.setting("key_limit", o.KeyLimit)
		r.setting("handler", o.Handler.String())
		r.setting("tail", o.Tail.String())
		r.setting("drain", o.Drain)
	case "latency":
		r.setting("rate", o.Rate)
		r.setting("duration", o.Duration.String())
		r.setting("handler", o.Handler.String())
		r.setting("enqueue_callers", latencyCallers(o.Rate))
	case "rate":
		r.setting("rate", o.Rate)
		r.setting("duration", o.Duration.String())
		r.setting("handler", o.Handler.String())
		r.setting("enqueue_callers", latencyCallers(o.Rate))
		r.setting("payload_bytes", ratePayloadBytes)
		r.setting("database", o.DB.ConnConfig.Database+" (the run's own)")
		r.setting("application_name", s.app)
	case "memory":
		r.setting("inflight", o.Inflight)
		r.setting("handler_hold", o.Handler.String())
		r.setting("sample_every", memorySampleEvery.String())
	}
	rows := make([][]string, len(r.Settings))
	for i, p := range r.Settings {
		rows[i] = []string{p.Key, format(p.Value)}
	}
	r.table(Table{Title: "settings", Header: []string{"setting", "value"}, Rows: rows})
}

// vcsRevision is the commit the binary was built from, when the go command recorded it.
func vcsRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "unknown", false
	for _, st := range info.Settings {
		switch st.Key {
		case "vcs.revision":
			rev = st.Value[:min(len(st.Value), 7)]
		case "vcs.modified":
			dirty = st.Value == "true"
		}
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// statements adds the dispatchers' statement timings to the report.
func (s *session) statements(title string) {
	s.report.table(s.trace.table(title))
	s.report.Details["statements"] = s.trace.rows()
}
