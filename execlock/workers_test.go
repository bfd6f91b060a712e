package execlock

import (
	"testing"
	"time"
)

// A worker that finished a command waits for the next one, takes it, and exits after workerIdle
// without one.
func TestWorkersReuseThenExit(t *testing.T) {
	w := newWorkers()
	defer w.close()
	ran := make(chan int, 2)
	w.do(func() { ran <- 1 })
	if got := <-ran; got != 1 {
		t.Fatalf("first command: got %d", got)
	}
	// The worker is idle now (or about to be): a send reaches it.
	select {
	case w.work <- func() { ran <- 2 }:
	case <-time.After(time.Second):
		t.Fatal("no idle worker took a command within 1s of finishing the last one")
	}
	if got := <-ran; got != 2 {
		t.Fatalf("second command: got %d", got)
	}
	time.Sleep(workerIdle + 200*time.Millisecond)
	select {
	case w.work <- func() {}:
		t.Fatalf("a worker still took commands %v after its last one", workerIdle+200*time.Millisecond)
	case <-time.After(100 * time.Millisecond):
	}
}

// close ends idle workers at once, waits for a busy one to finish its command, and commands after
// close still run.
func TestWorkersClose(t *testing.T) {
	w := newWorkers()
	release, finished := make(chan struct{}), make(chan struct{})
	w.do(func() {
		<-release
		close(finished)
	})
	w.do(func() {}) // a second worker, idle once this returns
	closed := make(chan struct{})
	go func() {
		w.close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("close returned while a command was still running")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(time.Second):
		t.Fatal("close did not return within 1s of the last command's end")
	}
	select {
	case <-finished:
	default:
		t.Fatal("close returned before the running command finished")
	}
	after := make(chan struct{})
	w.do(func() { close(after) })
	select {
	case <-after:
	case <-time.After(time.Second):
		t.Fatal("a command given after close did not run")
	}
	w.close() // a second close does nothing
}
