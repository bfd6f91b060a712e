//go:build !linux

package integration_test

import "syscall"

// mpWorkerProcAttr: without Pdeathsig, the worker's own parent watch (see runWorker) ends it when
// the test process dies.
func mpWorkerProcAttr() *syscall.SysProcAttr { return nil }
