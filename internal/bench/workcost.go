package bench

import (
	"bufio"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// workMeter measures what the work of drain, unique and slots costs, from the dispatchers' start
// to the last job processed: the CPU time of this process, of the run's PostgreSQL backends and of
// the machine (cpuMeter), the lock nodes' own CPU time (Redis's INFO cpu), and the round trips
// (the dispatchers' statements, and the Redis round trips that carried lock commands). It never
// fails a run: where the CPU time cannot be read (a server on another host), it says why.
type workMeter struct {
	s        *session
	meter    *cpuMeter
	nodes    []*redis.Client // one per lock node, without the lock hook, for INFO
	redis0   time.Duration
	missing  string // why the CPU time is not measured; "" when it is
	redisErr string // why the lock nodes' CPU time is not measured
}

// workCost is what a run's work cost (see workMeter).
type workCost struct {
	jobs       int64
	cpu        cpuWindow
	redis      time.Duration
	missing    string
	redisErr   string
	keyed      bool
	statements int64 // the dispatchers' statements
	redisTrips int64 // pipelines and commands alone that carried lock commands
}

// startWork begins measuring the run's work; the dispatchers' pools must be open.
func (s *session) startWork(ctx context.Context) *workMeter {
	w := &workMeter{s: s}
	m, err := newCPUMeter(ctx, s.opts.DB.ConnConfig, s.app)
	if err == nil {
		if err = m.begin(ctx); err != nil {
			m.close(ctx)
		}
	}
	if err != nil {
		w.missing = err.Error()
		return w
	}
	w.meter = m
	if s.redis != nil {
		for i := range s.redis.nodes {
			node, err := s.redis.plainClient(i)
			if err != nil {
				w.redisErr = err.Error()
				break
			}
			w.nodes = append(w.nodes, node)
		}
		if w.redisErr == "" {
			w.redis0, err = redisCPU(ctx, w.nodes)
			if err != nil {
				w.redisErr = err.Error()
			}
		}
	}
	return w
}

// end ends the measure once the last job was processed, and closes what it opened.
func (w *workMeter) end(ctx context.Context, jobs int64) workCost {
	c := workCost{jobs: jobs, missing: w.missing, redisErr: w.redisErr, keyed: w.s.redis != nil,
		statements: w.s.trace.calls()}
	if w.s.redis != nil {
		c.redisTrips = w.s.redis.hook.pipelines.Load() + w.s.redis.hook.alone.Load()
	}
	if w.meter != nil {
		var err error
		if c.cpu, err = w.meter.end(ctx); err != nil {
			c.missing = err.Error()
		}
		w.meter.close(ctx)
	}
	if len(w.nodes) > 0 && c.redisErr == "" {
		r, err := redisCPU(ctx, w.nodes)
		switch {
		case err != nil:
			c.redisErr = err.Error()
		case r < w.redis0:
			c.redisErr = "a lock node's CPU time went back: it restarted during the run"
		default:
			c.redis = r - w.redis0
		}
	}
	for _, n := range w.nodes {
		_ = n.Close()
	}
	return c
}

// redisCPU sums the CPU time the nodes' processes have used (INFO cpu: used_cpu_sys and
// used_cpu_user), which Redis reports wherever it runs.
func redisCPU(ctx context.Context, nodes []*redis.Client) (time.Duration, error) {
	var sum time.Duration
	for _, n := range nodes {
		info, err := n.Info(ctx, "cpu").Result()
		if err != nil {
			return 0, fmt.Errorf("reading the lock node %s's CPU time (INFO cpu): %w", n.Options().Addr, err)
		}
		d, err := parseRedisCPU(info)
		if err != nil {
			return 0, fmt.Errorf("the lock node %s's INFO cpu: %w", n.Options().Addr, err)
		}
		sum += d
	}
	return sum, nil
}

// parseRedisCPU returns used_cpu_sys plus used_cpu_user from the text of INFO cpu.
func parseRedisCPU(info string) (time.Duration, error) {
	var sum time.Duration
	found := 0
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		s, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: not a number of seconds", k, v)
		}
		sum += seconds(s)
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("want used_cpu_sys and used_cpu_user, found %d of them", found)
	}
	return sum, nil
}

// resultPairs adds the cost to the RESULT line: the CPU figures when they were measured.
func (c workCost) resultPairs(r *Report) {
	if c.missing == "" {
		r.result("worker_cpu_us_per_job", perJob(c.cpu.Self, c.jobs))
		r.result("pg_cpu_us_per_job", perJob(c.cpu.PG, c.jobs))
		if c.keyed && c.redisErr == "" {
			r.result("redis_cpu_us_per_job", perJob(c.redis, c.jobs))
		}
		r.result("machine_cpu_us_per_job", perJob(c.cpu.Machine, c.jobs))
	}
	r.result("statements_per_job", perJobCount(c.statements, c.jobs))
	if c.keyed {
		r.result("redis_trips_per_job", perJobCount(c.redisTrips, c.jobs))
	}
}

// table returns the cost as a report table.
func (c workCost) table() Table {
	t := Table{Title: "what the work cost (dispatchers' start -> last job processed)", Header: []string{"measure", "value", "note"}}
	if c.missing != "" {
		t.Rows = append(t.Rows, []string{"CPU time", "not measured", c.missing})
	} else {
		cores := time.Duration(runtime.NumCPU())
		t.Rows = append(t.Rows,
			[]string{"this process's CPU (dispatchers, bench)", cpuCell(c.cpu.Self, c.jobs), fmt.Sprintf("%.1f%% of one core", share(c.cpu.Self, c.cpu.Elapsed))},
			[]string{"PostgreSQL backends' CPU (the dispatchers' connections)", cpuCell(c.cpu.PG, c.jobs),
				fmt.Sprintf("%d backends; %d connected, %d disconnected during the run", c.cpu.Backends, c.cpu.Came, c.cpu.Went)})
		switch {
		case c.keyed && c.redisErr != "":
			t.Rows = append(t.Rows, []string{"Redis lock nodes' CPU", "not measured", c.redisErr})
		case c.keyed:
			t.Rows = append(t.Rows, []string{"Redis lock nodes' CPU (INFO cpu, every client's)", cpuCell(c.redis, c.jobs), ""})
		}
		t.Rows = append(t.Rows, []string{"machine's CPU (every process, busy time)", cpuCell(c.cpu.Machine, c.jobs),
			fmt.Sprintf("%.1f%% of %d cores busy", share(c.cpu.Machine, c.cpu.Elapsed*cores), runtime.NumCPU())})
	}
	t.Rows = append(t.Rows, []string{"dispatchers' statements", fmt.Sprintf("%d = %.3f per job", c.statements, perJobCount(c.statements, c.jobs)),
		"BEGIN and COMMIT included; each of a batch counts"})
	if c.keyed {
		t.Rows = append(t.Rows, []string{"Redis round trips carrying lock commands", fmt.Sprintf("%d = %.3f per job", c.redisTrips,
			perJobCount(c.redisTrips, c.jobs)), "pipelines, and commands sent alone"})
	}
	return t
}

func cpuCell(d time.Duration, jobs int64) string {
	return fmt.Sprintf("%.2f s = %.1f µs/job", d.Seconds(), perJob(d, jobs))
}

// perJobCount is n per job, with three decimals: runs share a statement among hundreds of jobs.
func perJobCount(n, jobs int64) float64 {
	if jobs <= 0 {
		return 0
	}
	return round(float64(n)/float64(jobs), 3)
}
