package bench

import "syscall"

// childProcAttr makes the kernel kill a spawned redis-server when jobpipe dies, even without running
// its cleanup (SIGKILL, a crash): a throw-away node must not outlive its run.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
