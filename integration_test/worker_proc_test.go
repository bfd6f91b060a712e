package integration_test

// The test side of worker processes: starting them, reading what they report, signalling them, and
// making sure none outlives its test.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
)

// mpWorkerSettings configure one worker process; zero durations leave dispatcher defaults.
type mpWorkerSettings struct {
	DatabaseURL string
	RedisAddrs  []string
	RedisPrefix string
	Kind        string
	Node        string

	SleepMin, SleepMax time.Duration
	BlockIDs           []int64
	BlockBlogs         []int64 // every job of these blogs blocks, like a job of BlockIDs
	BlockUpToAttempt   int     // 0: every attempt of a blocked job blocks
	KeyLimit           int     // the kind's static jobinfo.KeyLimit; 0: the default

	LeaseTTL, RescueInterval, LeaderTTL, PollInterval, RetryDelay time.Duration
	Concurrency                                                   int
	KeyRunJobs                                                    int // Config.KeyRunJobs; 0: the default

	// Extra is more environment for the worker: the settings of the extras in mpWorkerExtras.
	Extra map[string]string
}

func (s mpWorkerSettings) environ() []string {
	env := append(os.Environ(),
		mpWorkerEnv+"=1",
		mpEnvDatabaseURL+"="+s.DatabaseURL,
		mpEnvRedis+"="+strings.Join(s.RedisAddrs, ","),
		mpEnvPrefix+"="+s.RedisPrefix,
		mpEnvKind+"="+s.Kind,
		mpEnvNode+"="+s.Node,
		mpEnvSleepMin+"="+s.SleepMin.String(),
		mpEnvSleepMax+"="+s.SleepMax.String(),
		mpEnvBlockUpTo+"="+strconv.Itoa(s.BlockUpToAttempt),
	)
	list := func(ids []int64) string {
		var out []string
		for _, id := range ids {
			out = append(out, strconv.FormatInt(id, 10))
		}
		return strings.Join(out, ",")
	}
	env = append(env, mpEnvBlockIDs+"="+list(s.BlockIDs), mpEnvBlockBlogs+"="+list(s.BlockBlogs))
	for key, d := range map[string]time.Duration{mpEnvLeaseTTL: s.LeaseTTL, mpEnvRescue: s.RescueInterval,
		mpEnvLeaderTTL: s.LeaderTTL, mpEnvPoll: s.PollInterval, mpEnvRetryDelay: s.RetryDelay} {
		if d != 0 {
			env = append(env, key+"="+d.String())
		}
	}
	if s.Concurrency != 0 {
		env = append(env, mpEnvConcurrency+"="+strconv.Itoa(s.Concurrency))
	}
	if s.KeyRunJobs != 0 {
		env = append(env, mpEnvKeyRunJobs+"="+strconv.Itoa(s.KeyRunJobs))
	}
	if s.KeyLimit != 0 {
		env = append(env, mpEnvKeyLimit+"="+strconv.Itoa(s.KeyLimit))
	}
	for key, v := range s.Extra {
		env = append(env, key+"="+v)
	}
	return env
}

// mpWorker is one running worker process.
type mpWorker struct {
	Name string
	Pid  int

	cmd   *exec.Cmd
	ready chan struct{} // closed when the worker reported its dispatcher started
	done  chan struct{} // closed when the process has exited and been waited for
	// Set before done is closed.
	state *os.ProcessState
	exit  time.Time

	mu    sync.Mutex
	stats *dispatcher.Stats // reported on the way out
}

// mpStartWorker starts a worker process for t. Its stderr (the dispatcher's logs) goes to t.Log
// prefixed by its name. It is killed when t ends, whatever the outcome.
func mpStartWorker(t *testing.T, s mpWorkerSettings) *mpWorker {
	t.Helper()
	w := &mpWorker{Name: s.Node, ready: make(chan struct{}), done: make(chan struct{})}
	cmd := exec.CommandContext(t.Context(), os.Args[0])
	cmd.Env = s.environ()
	var readyOnce sync.Once
	stdout := &mpLineWriter{fn: func(line string) {
		switch {
		case line == mpReadyLine:
			readyOnce.Do(func() { close(w.ready) })
		case strings.HasPrefix(line, mpStatsLine):
			var st dispatcher.Stats
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, mpStatsLine)), &st); err != nil {
				t.Errorf("%s: bad stats line %q: %v", w.Name, line, err)
				return
			}
			w.mu.Lock()
			w.stats = &st
			w.mu.Unlock()
		default:
			t.Logf("%s stdout: %s", w.Name, line)
		}
	}}
	stderr := &mpLineWriter{fn: func(line string) { t.Logf("%s: %s", w.Name, line) }}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 5 * time.Second // bounds Wait should a pipe stay open
	cmd.SysProcAttr = mpWorkerProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker %s: %v", w.Name, err)
	}
	w.cmd, w.Pid = cmd, cmd.Process.Pid
	go func() {
		_ = cmd.Wait()
		stdout.flush()
		stderr.flush()
		w.state, w.exit = cmd.ProcessState, time.Now()
		close(w.done)
	}()
	t.Cleanup(func() {
		select {
		case <-w.done:
			return
		default:
		}
		_ = syscall.Kill(w.Pid, syscall.SIGKILL)
		select {
		case <-w.done:
		case <-time.After(15 * time.Second):
			t.Errorf("worker %s (pid %d) did not exit after SIGKILL", w.Name, w.Pid)
		}
	})
	return w
}

// mpWaitReady waits until every worker's dispatcher has started.
func mpWaitReady(t *testing.T, within time.Duration, workers ...*mpWorker) {
	t.Helper()
	deadline := time.After(within)
	for _, w := range workers {
		select {
		case <-w.ready:
		case <-w.done:
			t.Fatalf("worker %s exited before it was ready: %v", w.Name, w.state)
		case <-deadline:
			t.Fatalf("worker %s not ready after %v", w.Name, within)
		}
	}
}

// Kill sends SIGKILL and waits until the process is gone: a crash, nothing runs on the way out.
func (w *mpWorker) Kill(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(w.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill worker %s: %v", w.Name, err)
	}
	select {
	case <-w.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("worker %s (pid %d) did not exit after SIGKILL", w.Name, w.Pid)
	}
	if ws, ok := w.state.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("worker %s ended with %v, not by SIGKILL: it was not running", w.Name, w.state)
	}
}

// Stats returns the dispatcher's stats the worker reported when it stopped, or nil.
func (w *mpWorker) Stats() *dispatcher.Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// mpTerminate sends SIGTERM to every worker at once and checks that each exits with status 0 within
// 10 s (the workers stop their dispatcher with a 10 s deadline). It returns how long each took.
func mpTerminate(t *testing.T, workers ...*mpWorker) []time.Duration {
	t.Helper()
	sent := time.Now()
	for _, w := range workers {
		if err := syscall.Kill(w.Pid, syscall.SIGTERM); err != nil {
			t.Errorf("SIGTERM worker %s: %v", w.Name, err)
		}
	}
	deadline := time.After(10 * time.Second)
	took := make([]time.Duration, len(workers))
	for i, w := range workers {
		select {
		case <-w.done:
			took[i] = w.exit.Sub(sent)
			if code := w.state.ExitCode(); code != 0 {
				t.Errorf("worker %s exited with %v after SIGTERM, want status 0", w.Name, w.state)
			}
		case <-deadline:
			t.Errorf("worker %s did not exit within 10s of SIGTERM", w.Name)
		}
	}
	return took
}

// mpLineWriter calls fn with each complete line written to it.
type mpLineWriter struct {
	mu  sync.Mutex
	buf []byte
	fn  func(line string)
}

func (w *mpLineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			break
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		w.fn(strings.TrimRight(line, "\r"))
	}
	return len(p), nil
}

// flush passes on a last line that had no newline.
func (w *mpLineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.fn(string(w.buf))
		w.buf = nil
	}
}

func (w *mpWorker) String() string { return fmt.Sprintf("%s(pid %d)", w.Name, w.Pid) }
