package testenv

import "syscall"

// childProcAttr makes the kernel kill a child redis-server when the test process dies, even
// when it dies without cleanups (a -timeout panic, SIGKILL): otherwise the node would run on.
// The signal is tied to the thread that started the child; Go only ends threads that a goroutine
// locked and left locked, which tests do not do.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
