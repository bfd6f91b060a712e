package faultkit

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

// WorkerSettings configure one worker process; zero durations leave dispatcher defaults.
type WorkerSettings struct {
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

	// The kinds a worker works besides the keyed one (see workerExtras); "" or false: not that one.
	PlainKind string // the plain kind of this name (PlainJob)
	InputKind string // the bad-input scenario's kind of this name (InputJob)
	TickKind  string // the kind of this name with a schedule of the same name firing every second
	FlakyKind string // the plain kind of this name whose jobs fail by FlakyError
	Probes    bool   // the probe kind (ProbeJob), whose jobs time their own heartbeats

	// LedgerURL gives the worker's ledger a pool of its own on this server ("": the worker's database).
	LedgerURL string
}

// Leases are the lease and maintenance settings of the workers of a scenario that loses leases on
// purpose: short, so that a rescue comes within seconds.
type Leases struct {
	TTL, Rescue, LeaderTTL, Poll, RetryDelay time.Duration
}

// Apply sets s's LeaseTTL, RescueInterval, LeaderTTL, PollInterval and RetryDelay from l.
func (l Leases) Apply(s *WorkerSettings) {
	s.LeaseTTL, s.RescueInterval, s.LeaderTTL, s.PollInterval, s.RetryDelay = l.TTL, l.Rescue, l.LeaderTTL, l.Poll, l.RetryDelay
}

func (s WorkerSettings) environ() []string {
	env := append(os.Environ(),
		WorkerModeEnv+"=1",
		envDatabaseURL+"="+s.DatabaseURL,
		envRedis+"="+strings.Join(s.RedisAddrs, ","),
		envPrefix+"="+s.RedisPrefix,
		envKind+"="+s.Kind,
		envNode+"="+s.Node,
		envSleepMin+"="+s.SleepMin.String(),
		envSleepMax+"="+s.SleepMax.String(),
		envBlockUpTo+"="+strconv.Itoa(s.BlockUpToAttempt),
	)
	list := func(ids []int64) string {
		var out []string
		for _, id := range ids {
			out = append(out, strconv.FormatInt(id, 10))
		}
		return strings.Join(out, ",")
	}
	env = append(env, envBlockIDs+"="+list(s.BlockIDs), envBlockBlogs+"="+list(s.BlockBlogs))
	for key, d := range map[string]time.Duration{envLeaseTTL: s.LeaseTTL, envRescue: s.RescueInterval,
		envLeaderTTL: s.LeaderTTL, envPoll: s.PollInterval, envRetryDelay: s.RetryDelay} {
		if d != 0 {
			env = append(env, key+"="+d.String())
		}
	}
	if s.Concurrency != 0 {
		env = append(env, envConcurrency+"="+strconv.Itoa(s.Concurrency))
	}
	if s.KeyRunJobs != 0 {
		env = append(env, envKeyRunJobs+"="+strconv.Itoa(s.KeyRunJobs))
	}
	if s.KeyLimit != 0 {
		env = append(env, envKeyLimit+"="+strconv.Itoa(s.KeyLimit))
	}
	for key, v := range map[string]string{envPlainKind: s.PlainKind, envInputKind: s.InputKind, envTickKind: s.TickKind,
		envFlakyKind: s.FlakyKind, envLedgerURL: s.LedgerURL} {
		if v != "" {
			env = append(env, key+"="+v)
		}
	}
	if s.Probes {
		env = append(env, envProbes+"="+ProbeKind)
	}
	return env
}

// Worker is one running worker process.
type Worker struct {
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

// StartWorker starts a worker process for t. Its stderr (the dispatcher's logs) goes to t.Log
// prefixed by its name. It is killed when t ends, whatever the outcome.
func StartWorker(t *testing.T, s WorkerSettings) *Worker {
	t.Helper()
	w := &Worker{Name: s.Node, ready: make(chan struct{}), done: make(chan struct{})}
	cmd := exec.CommandContext(t.Context(), os.Args[0])
	cmd.Env = s.environ()
	var readyOnce sync.Once
	stdout := &lineWriter{fn: func(line string) {
		switch {
		case line == readyLine:
			readyOnce.Do(func() { close(w.ready) })
		case strings.HasPrefix(line, statsLine):
			var st dispatcher.Stats
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, statsLine)), &st); err != nil {
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
	stderr := &lineWriter{fn: func(line string) { t.Logf("%s: %s", w.Name, line) }}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 5 * time.Second // bounds Wait should a pipe stay open
	cmd.SysProcAttr = workerProcAttr()
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

// WaitReady waits until every worker's dispatcher has started.
func WaitReady(t *testing.T, within time.Duration, workers ...*Worker) {
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
func (w *Worker) Kill(t *testing.T) {
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

// Exited reports whether the process has exited, and if so how it ended.
func (w *Worker) Exited() (*os.ProcessState, bool) {
	select {
	case <-w.done:
		return w.state, true
	default:
		return nil, false
	}
}

// Stats returns the dispatcher's stats the worker reported when it stopped, or nil.
func (w *Worker) Stats() *dispatcher.Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Terminate sends SIGTERM to every worker at once and checks that each exits with status 0 within
// 10 s (the workers stop their dispatcher with a 10 s deadline). It returns how long each took.
func Terminate(t *testing.T, workers ...*Worker) []time.Duration {
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

// lineWriter calls fn with each complete line written to it.
type lineWriter struct {
	mu  sync.Mutex
	buf []byte
	fn  func(line string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
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
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.fn(string(w.buf))
		w.buf = nil
	}
}

func (w *Worker) String() string { return fmt.Sprintf("%s(pid %d)", w.Name, w.Pid) }

// SumStats sums the stats the workers reported on their way out.
func SumStats(t *testing.T, workers []*Worker) dispatcher.Stats {
	t.Helper()
	var sum dispatcher.Stats
	for _, w := range workers {
		st := w.Stats()
		if st == nil {
			t.Errorf("worker %s reported no stats on the way out", w.Name)
			continue
		}
		sum.Claimed += st.Claimed
		sum.Processed += st.Processed
		sum.Released += st.Released
		sum.Retried += st.Retried
		sum.Failed += st.Failed
		sum.StaleFinishes += st.StaleFinishes
		sum.LeasesLost += st.LeasesLost
		sum.ClaimsRefused += st.ClaimsRefused
		sum.Rescued += st.Rescued
		sum.Locks.Acquired += st.Locks.Acquired
		sum.Locks.Taken += st.Locks.Taken
		sum.Locks.Unavailable += st.Locks.Unavailable
		sum.Locks.Extended += st.Locks.Extended
		sum.Locks.ExtendFailed += st.Locks.ExtendFailed
		sum.Locks.Released += st.Locks.Released
		sum.Locks.ReleaseFailed += st.Locks.ReleaseFailed
	}
	return sum
}

// CheckCleanStats fails t unless the summed stats show want jobs processed and nothing retried,
// failed, lost, stale or rescued.
func CheckCleanStats(t *testing.T, sum dispatcher.Stats, want int) {
	t.Helper()
	if sum.Processed != int64(want) || sum.Retried != 0 || sum.Failed != 0 || sum.StaleFinishes != 0 || sum.LeasesLost != 0 || sum.Rescued != 0 {
		t.Errorf("workers' stats summed: %+v; want %d processed, no retry, failure, stale finish, lost lease or rescue", sum, want)
	}
}

// StatsSummary is the part of the summed stats a test reports.
func StatsSummary(s dispatcher.Stats) string {
	return fmt.Sprintf("claimed %d, processed %d, released %d, claims refused by the database %d, lock attempts refused by contention (Locks.Taken) %d, locks acquired %d, lock releases failed %d",
		s.Claimed, s.Processed, s.Released, s.ClaimsRefused, s.Locks.Taken, s.Locks.Acquired, s.Locks.ReleaseFailed)
}
