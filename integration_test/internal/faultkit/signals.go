package faultkit

// Worker processes stopped and continued, and the check that none exited.

import (
	"errors"
	"sync"
	"syscall"
	"testing"
)

// Pause stops w's process (SIGSTOP): its every goroutine, timer and connection freezes as in a
// long GC pause or a suspended VM, while the kernel keeps its sockets open. resume continues it.
func Pause(t *testing.T, w *Worker) (resume func()) {
	t.Helper()
	if err := syscall.Kill(w.Pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %s: %v", w, err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			if err := syscall.Kill(w.Pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
				t.Errorf("SIGCONT %s: %v", w, err)
			}
		})
	}
	// A failing scenario must not leave it stopped: the cleanup that kills it runs after this one.
	t.Cleanup(resume)
	return resume
}

// CheckAlive fails t for each worker whose process has exited.
func CheckAlive(t *testing.T, what string, workers ...*Worker) {
	t.Helper()
	for _, w := range workers {
		if state, exited := w.Exited(); exited {
			t.Errorf("%s: worker %s exited (%v)", what, w, state)
		}
	}
}

// CheckAliveDuring fails t for every worker that has exited: none may, during a fault.
func CheckAliveDuring(t *testing.T, during string, workers ...*Worker) {
	t.Helper()
	for _, w := range workers {
		if state, exited := w.Exited(); exited {
			t.Errorf("worker %s exited during %s: %v", w.Name, during, state)
		}
	}
}

// Signal stops (SIGSTOP) or continues (SIGCONT) a worker process.
func Signal(t *testing.T, w *Worker, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(w.Pid, sig); err != nil {
		t.Fatalf("%v to worker %s: %v", sig, w.Name, err)
	}
}
