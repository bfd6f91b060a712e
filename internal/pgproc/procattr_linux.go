package pgproc

import "syscall"

// childProcAttr makes the kernel kill a child when the process that started it dies, even without
// its cleanups (a -timeout panic, SIGKILL): a throw-away server must not outlive its owner. The
// signal is tied to the thread that started the child; Go only ends threads that a goroutine locked
// and left locked. It survives the switch to the server's user, which the child makes first.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
