package faultkit

import "syscall"

// workerProcAttr makes the kernel kill a worker process when the test process dies, even without
// its cleanups (a -timeout panic, SIGKILL, a closed output pipe). The signal is tied to the thread
// that started the child; Go only ends threads that a goroutine locked and left locked.
func workerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
