//go:build !linux

package faultkit

import "syscall"

// workerProcAttr: without Pdeathsig, the worker's own parent watch (see RunWorker) ends it when
// the test process dies.
func workerProcAttr() *syscall.SysProcAttr { return nil }
