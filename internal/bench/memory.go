package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/procfs"

	"github.com/jobpipe/jobpipe/dispatcher"
)

// memoryTargetMiB is the bound on a worker's RSS with 2,000 jobs in flight.
const memoryTargetMiB = 100

// memorySampleEvery is how often memory samples the process.
const memorySampleEvery = 100 * time.Millisecond

// gateTimeout is how long a handler waits for Inflight handlers to run at once before it holds
// anyway: a dispatcher that never reaches that many still finishes the run, which then reports the
// most it reached and the timeouts.
const gateTimeout = 30 * time.Second

// gate holds each handler until target handlers run at once, or every job has started: each group of
// target handlers then holds together, so the process is sampled with exactly target jobs in flight.
type gate struct {
	target, jobs int64

	mu                     sync.Mutex
	running, started, most int64
	full                   chan struct{} // closed when the handlers waiting on it may go on
	timeouts               atomic.Int64
}

func newGate(target, jobs int64) *gate {
	return &gate{target: target, jobs: jobs, full: make(chan struct{})}
}

// enter counts a handler that began, and returns what it waits on.
func (g *gate) enter() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running++
	g.started++
	g.most = max(g.most, g.running)
	ch := g.full
	if g.running >= g.target || g.started >= g.jobs {
		close(g.full)
		g.full = make(chan struct{})
	}
	return ch
}

// leave counts a handler that returned.
func (g *gate) leave() {
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
}

// counts returns the handlers running now and the most that ever ran at once.
func (g *gate) counts() (running, most int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running, g.most
}

// hold waits until the gate opens for ch (or gateTimeout passes), then hold long.
func (g *gate) hold(ctx context.Context, ch <-chan struct{}, hold time.Duration) error {
	t := time.NewTimer(gateTimeout)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		g.timeouts.Add(1)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return sleepCtx(ctx, hold)
}

// memSample is one look at the process.
type memSample struct {
	AtS        float64 `json:"t_s"`
	InFlight   int64   `json:"in_flight"`
	Processed  int64   `json:"processed"`
	RSS        int64   `json:"rss_bytes"` // VmRSS; -1 where /proc/self/status is not readable
	HeapInuse  uint64  `json:"heap_inuse_bytes"`
	StackInuse uint64  `json:"stack_inuse_bytes"`
	Sys        uint64  `json:"sys_bytes"` // all the Go runtime got from the OS
	Goroutines int     `json:"goroutines"`
}

// takeSample reads the process's RSS, the Go runtime's memory and its goroutines.
func takeSample(at time.Duration, inFlight, processed int64) memSample {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, _ := procStatus()
	return memSample{AtS: round(at.Seconds(), 2), InFlight: inFlight, Processed: processed, RSS: rss,
		HeapInuse: ms.HeapInuse, StackInuse: ms.StackInuse, Sys: ms.Sys, Goroutines: runtime.NumGoroutine()}
}

// procStatus returns the process's resident set (VmRSS) and its peak (VmHWM) in bytes, -1 each where
// /proc/self/status is not readable (not Linux).
func procStatus() (rss, hwm int64) {
	self, err := procfs.Self()
	if err != nil {
		return -1, -1
	}
	st, err := self.NewStatus()
	if err != nil {
		return -1, -1
	}
	return int64(st.VmRSS), int64(st.VmHWM)
}

// memPeaks is the highest of what the samples saw.
type memPeaks struct {
	Samples         int       `json:"samples"`
	Peak            memSample `json:"rss_peak_sample"`   // the sample of highest RSS
	AtTarget        memSample `json:"rss_target_sample"` // the highest RSS with Inflight jobs in flight
	SamplesAtTarget int       `json:"samples_at_target"`
	HeapInuse       uint64    `json:"heap_inuse_peak_bytes"`
	Sys             uint64    `json:"sys_peak_bytes"`
	StackInuse      uint64    `json:"stack_inuse_peak_bytes"`
	Goroutines      int       `json:"goroutines_peak"`
}

// add takes one sample into the peaks; target is the in-flight count asked for.
func (p *memPeaks) add(s memSample, target int64) {
	if p.Samples == 0 || s.RSS > p.Peak.RSS {
		p.Peak = s
	}
	p.Samples++
	if s.InFlight >= target {
		if p.SamplesAtTarget == 0 || s.RSS > p.AtTarget.RSS {
			p.AtTarget = s
		}
		p.SamplesAtTarget++
	}
	p.HeapInuse, p.Sys = max(p.HeapInuse, s.HeapInuse), max(p.Sys, s.Sys)
	p.StackInuse, p.Goroutines = max(p.StackInuse, s.StackInuse), max(p.Goroutines, s.Goroutines)
}

// sampleMemory samples every memorySampleEvery until stop is closed, writing a progress line every
// Progress, and returns the samples.
func sampleMemory(log io.Writer, every time.Duration, start time.Time, sample func(at time.Duration) memSample,
	stop <-chan struct{}) []memSample {
	t := time.NewTicker(memorySampleEvery)
	defer t.Stop()
	var out []memSample
	lastLine := start
	for {
		select {
		case <-stop:
			return append(out, sample(time.Since(start)))
		case now := <-t.C:
			s := sample(now.Sub(start))
			out = append(out, s)
			if every > 0 && now.Sub(lastLine) >= every {
				lastLine = now
				fmt.Fprintf(log, "%-14s %6.1fs  done %9d  in flight %5d  rss %6.1f MiB  heap %6.1f MiB  goroutines %6d\n",
					"memory", s.AtS, s.Processed, s.InFlight, mib(s.RSS), mib(int64(s.HeapInuse)), s.Goroutines)
			}
		}
	}
}

// mib is n bytes in MiB with one decimal; negative (unknown) stays -1.
func mib(n int64) float64 {
	if n < 0 {
		return -1
	}
	return round(float64(n)/(1<<20), 1)
}

// runMemory enqueues Jobs jobs up front (EnqueueMany, before the dispatcher starts, its batches then
// garbage), returns the insert's memory to the OS, and starts one dispatcher of Workers (default
// Inflight) whose handlers hold until Inflight of them run at once, then Handler long. The process
// (the dispatcher, its pool, and the bench's own pool and bookkeeping) is sampled every 100 ms.
func runMemory(ctx context.Context, s *session) error {
	o := s.opts
	jobs, target := int64(o.Jobs), int64(o.Inflight)
	kind, err := createKind[plainJob](ctx, s, "bench_memory")
	if err != nil {
		return err
	}
	insertTime, err := load(ctx, s, kind, jobs, newPlainJob)
	if err != nil {
		return err
	}
	if err := s.analyze(ctx, kind.Info().Table, false); err != nil {
		return err
	}
	// The insert's batches are garbage now: collect them and give their pages back, so the samples
	// show what working the jobs takes, not what the producer left behind.
	runtime.GC()
	debug.FreeOSMemory()
	base := takeSample(0, 0, 0)
	g := newGate(target, jobs)
	var led ledger
	s.trace.reset()
	start := time.Now()
	f, err := s.startFleet(ctx, o.Dispatchers[0], "memory", false, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[plainJob]) error {
			ch := g.enter()
			defer g.leave()
			led.run(j.Data.N)
			return g.hold(ctx, ch, o.Handler)
		})
	})
	if err != nil {
		return err
	}
	defer f.stop(ctx)
	stopSampling, sampled := make(chan struct{}), make(chan []memSample, 1)
	go func() {
		sampled <- sampleMemory(o.Log, o.Progress, start, func(at time.Duration) memSample {
			running, _ := g.counts()
			return takeSample(at, running, f.processed())
		}, stopSampling)
	}()
	err = s.waitProcessed(ctx, f, jobs)
	elapsed := time.Since(start)
	close(stopSampling)
	samples := <-sampled
	if err != nil {
		return err
	}
	if err := f.stop(ctx); err != nil {
		return err
	}
	acc, err := s.account(ctx, kind.Info().Table, &led, jobs, 0)
	if err != nil {
		return err
	}
	var peaks memPeaks
	for _, sm := range samples {
		peaks.add(sm, target)
	}
	_, most := g.counts()
	_, hwm := procStatus()
	s.recordMemory(memoryRun{jobs: jobs, target: target, most: most, insert: insertTime, elapsed: elapsed, base: base,
		peaks: peaks, hwm: hwm, samples: samples, timeouts: g.timeouts.Load(), stats: f.stats(), acc: acc})
	return nil
}

// memoryRun is what runMemory measured, for its report.
type memoryRun struct {
	jobs, target, most, hwm, timeouts int64
	insert, elapsed                   time.Duration
	base                              memSample
	peaks                             memPeaks
	samples                           []memSample
	stats                             dispatcher.Stats
	acc                               accounting
}

func (s *session) recordMemory(m memoryRun) {
	o, r := s.opts, s.report
	p := m.peaks
	met := p.Peak.RSS >= 0 && mib(p.Peak.RSS) <= memoryTargetMiB && m.most >= m.target
	r.result("scenario", "memory")
	r.result("jobs", m.jobs)
	r.result("inflight", m.target)
	r.result("inflight_max", m.most)
	r.result("workers", o.Workers)
	r.result("seconds", round(m.elapsed.Seconds(), 2))
	r.result("rss_base_mib", mib(m.base.RSS))
	r.result("rss_peak_mib", mib(p.Peak.RSS))
	r.result("inflight_at_peak", p.Peak.InFlight)
	r.result("rss_at_inflight_mib", mib(p.AtTarget.RSS))
	r.result("hwm_mib", mib(m.hwm))
	r.result("heap_peak_mib", mib(int64(p.HeapInuse)))
	r.result("sys_peak_mib", mib(int64(p.Sys)))
	r.result("goroutines_peak", p.Goroutines)
	r.result("gate_timeouts", m.timeouts)
	r.result("targets_met", met)
	m.acc.resultPairs(r)
	r.Details["dispatcher_stats"] = m.stats
	r.Details["memory"] = map[string]any{"base": m.base, "peaks": p, "vm_hwm_bytes": m.hwm, "samples": m.samples}
	perJob := "n/a"
	if m.most > 0 && p.AtTarget.RSS > 0 && m.base.RSS > 0 {
		perJob = fmt.Sprintf("%.1f KiB", float64(p.AtTarget.RSS-m.base.RSS)/float64(m.most)/1024)
	}
	verdict := "missed"
	if met {
		verdict = "met"
	}
	r.table(Table{Title: "memory (this process: the dispatcher, and the bench's producer, pool and bookkeeping)",
		Header: []string{"measure", "value", "target"}, Rows: [][]string{
			{"jobs (EnqueueMany before the dispatcher starts)", fmt.Sprintf("%d in %.1f s", m.jobs, m.insert.Seconds()), ""},
			{"in flight asked / most at once / at the RSS peak", fmt.Sprintf("%d / %d / %d", m.target, m.most, p.Peak.InFlight), ""},
			{"handler", fmt.Sprintf("holds until %d run, then %v", m.target, o.Handler), ""},
			{"samples (every 100 ms) / with all in flight", fmt.Sprintf("%d / %d", len(m.samples), p.SamplesAtTarget), ""},
			{"RSS before the dispatcher started (after GC)", fmt.Sprintf("%.1f MiB", mib(m.base.RSS)), ""},
			{"RSS peak (VmRSS)", fmt.Sprintf("%.1f MiB", mib(p.Peak.RSS)), fmt.Sprintf("<= %d MiB: %s", memoryTargetMiB, verdict)},
			{"RSS peak with all in flight", fmt.Sprintf("%.1f MiB", mib(p.AtTarget.RSS)), ""},
			{"RSS per job in flight (peak with all in flight - before)", perJob, ""},
			{"process high-water mark (VmHWM, whole run with the insert)", fmt.Sprintf("%.1f MiB", mib(m.hwm)), ""},
			{"Go heap in use: before / peak", fmt.Sprintf("%.1f / %.1f MiB", mib(int64(m.base.HeapInuse)), mib(int64(p.HeapInuse))), ""},
			{"Go stacks in use: before / peak", fmt.Sprintf("%.1f / %.1f MiB", mib(int64(m.base.StackInuse)), mib(int64(p.StackInuse))), ""},
			{"Go runtime from the OS (Sys): before / peak", fmt.Sprintf("%.1f / %.1f MiB", mib(int64(m.base.Sys)), mib(int64(p.Sys))), ""},
			{"goroutines: before / peak", fmt.Sprintf("%d / %d", m.base.Goroutines, p.Goroutines), ""},
			{"handlers that gave up waiting for all to run", format(m.timeouts), "0"},
			{"claimed / processed", fmt.Sprintf("%d / %d", m.stats.Claimed, m.stats.Processed), ""},
		}})
	m.acc.record(r)
	s.statements("dispatchers' statements during the run (client-side time)")
}
