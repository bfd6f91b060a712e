package bench

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

// procStatus reads this process's memory as the kernel reports it: resident, and a peak at least as
// large. It does not run in parallel: another test's allocations would blur the RSS it compares.
func TestProcStatus(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc/self/status")
	}
	debug.FreeOSMemory() // what earlier tests freed goes back to the kernel, so new memory shows
	rss, hwm := procStatus()
	if rss <= 0 || hwm < rss {
		t.Errorf("procStatus() = %d, %d; want a positive RSS and a peak at least as large", rss, hwm)
	}
	// Touching 64 MiB more makes the process hold at least that much more, and its peak with it.
	held := make([]byte, 64<<20)
	for i := range held {
		held[i] = 1
	}
	rss2, hwm2 := procStatus()
	if rss2 < rss+60<<20 || hwm2 < rss2 {
		t.Errorf("after touching 64 MiB: RSS %d (was %d), peak %d; want 60 MiB more and a peak at least as large", rss2, rss, hwm2)
	}
	runtime.KeepAlive(held)
}

// The gate lets a group through once target handlers are in, and the last group once every job has
// started, and counts the most that ran at once.
func TestGateHoldsUntilTargetRun(t *testing.T) {
	t.Parallel()
	g := newGate(3, 5)
	first, second := g.enter(), g.enter()
	select {
	case <-first:
		t.Fatal("the gate opened with 2 of 3 running")
	default:
	}
	third := g.enter() // the third opens the group of all three
	for i, ch := range []<-chan struct{}{first, second, third} {
		select {
		case <-ch:
		default:
			t.Errorf("handler %d still waits with 3 of 3 running", i)
		}
	}
	g.leave()
	g.leave()
	fourth := g.enter() // 2 running: waits for a third
	select {
	case <-fourth:
		t.Fatal("the gate opened for the next group with 2 of 3 running")
	default:
	}
	fifth := g.enter() // the last job: opens whatever is running
	for _, ch := range []<-chan struct{}{fourth, fifth} {
		select {
		case <-ch:
		default:
			t.Error("the last group still waits after every job started")
		}
	}
	if running, most := g.counts(); running != 3 || most != 3 {
		t.Errorf("counts() = %d, %d; want 3 running, 3 at most", running, most)
	}
}

func TestGateHoldAndCancel(t *testing.T) {
	t.Parallel()
	g := newGate(2, 10)
	var wg sync.WaitGroup
	start := time.Now()
	for range 2 {
		wg.Go(func() {
			ch := g.enter()
			defer g.leave()
			if err := g.hold(context.Background(), ch, 20*time.Millisecond); err != nil {
				t.Errorf("hold: %v", err)
			}
		})
	}
	wg.Wait()
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Errorf("the pair returned after %v; want the 20ms hold once both ran", took)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.hold(ctx, g.enter(), time.Hour); err != context.Canceled {
		t.Errorf("hold with a cancelled context: %v; want context.Canceled", err)
	}
	if running, most := g.counts(); running != 1 || most != 2 || g.timeouts.Load() != 0 {
		t.Errorf("counts() = %d, %d, timeouts %d; want 1, 2, 0", running, most, g.timeouts.Load())
	}
}

func TestMemPeaks(t *testing.T) {
	t.Parallel()
	var p memPeaks
	for _, s := range []memSample{
		{AtS: 0.1, InFlight: 100, RSS: 40 << 20, HeapInuse: 10, Sys: 50, StackInuse: 1, Goroutines: 200},
		{AtS: 0.2, InFlight: 2000, RSS: 60 << 20, HeapInuse: 30, Sys: 70, StackInuse: 9, Goroutines: 4000},
		{AtS: 0.3, InFlight: 2000, RSS: 58 << 20, HeapInuse: 35, Sys: 70, StackInuse: 9, Goroutines: 4010},
		{AtS: 0.4, InFlight: 7, RSS: 64 << 20, HeapInuse: 20, Sys: 80, StackInuse: 2, Goroutines: 300},
	} {
		p.add(s, 2000)
	}
	if p.Samples != 4 || p.Peak.AtS != 0.4 || p.Peak.InFlight != 7 || p.AtTarget.AtS != 0.2 || p.SamplesAtTarget != 2 {
		t.Errorf("peaks: %+v", p)
	}
	if p.HeapInuse != 35 || p.Sys != 80 || p.StackInuse != 9 || p.Goroutines != 4010 {
		t.Errorf("runtime peaks: %+v", p)
	}
	// Where the RSS is unknown (-1), the first sample still stands as the peak.
	var unknown memPeaks
	unknown.add(memSample{AtS: 0.1, RSS: -1}, 1)
	if unknown.Peak.AtS != 0.1 || mib(unknown.Peak.RSS) != -1 || mib(3<<20) != 3 {
		t.Errorf("unknown RSS: %+v", unknown)
	}
}
