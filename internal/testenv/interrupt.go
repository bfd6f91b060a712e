package testenv

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// An interrupted run (^C, a cancelled CI job) would leave its containers running, since Ryuk may
// be off. Once a container is started, SIGINT and SIGTERM terminate the containers and exit.
// Processes that started none keep the default behaviour, so that tests signalling their own
// process are not disturbed.
var interrupts struct {
	once   sync.Once
	sig    chan os.Signal
	done   chan struct{}
	exited chan struct{}
}

// watchInterrupts starts the watcher, once.
func watchInterrupts() {
	interrupts.once.Do(func() {
		interrupts.sig = make(chan os.Signal, 1)
		interrupts.done = make(chan struct{})
		interrupts.exited = make(chan struct{})
		signal.Notify(interrupts.sig, os.Interrupt, syscall.SIGTERM)
		go func() {
			defer close(interrupts.exited)
			select {
			case s := <-interrupts.sig:
				fmt.Fprintf(os.Stderr, "testenv: %v: terminating the test containers\n", s)
				if err := terminateContainers(); err != nil {
					fmt.Fprintln(os.Stderr, err)
				}
				os.Exit(130)
			case <-interrupts.done:
			}
		}()
	})
}

// stopWatchingInterrupts stops the watcher, if it runs, before Main's leak check would see it.
func stopWatchingInterrupts() {
	interrupts.once.Do(func() {}) // no watcher from now on
	if interrupts.sig == nil {
		return
	}
	signal.Stop(interrupts.sig)
	close(interrupts.done)
	<-interrupts.exited
}
