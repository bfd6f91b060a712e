package redisproc

import "syscall"

// childProcAttr makes the kernel kill a child redis-server when the process that started it dies,
// even without running its cleanups (a -timeout panic, SIGKILL): a throw-away node must not outlive
// its owner. The signal is tied to the thread that started the child; Go only ends threads that a
// goroutine locked and left locked, which neither the tests nor the bench do.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
