//go:build !linux

package redisproc

import "syscall"

// childProcAttr: only Linux can tie a child's life to its parent's; elsewhere the cleanup kills it.
func childProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
