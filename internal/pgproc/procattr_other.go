//go:build !linux

package pgproc

import "syscall"

// childProcAttr: only Linux can tie a child's life to its parent's; elsewhere Close kills it.
func childProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
