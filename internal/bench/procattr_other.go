//go:build !linux

package bench

import "syscall"

// childProcAttr: only Linux ties a child's life to its parent's; elsewhere the cleanup kills it.
func childProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
