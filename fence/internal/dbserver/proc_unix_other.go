//go:build unix && !linux

package dbserver

import (
	"os"
	"syscall"
)

// setPdeathsig: no parent-death signal here; a test binary that dies
// leaves its servers running.
func setPdeathsig(*syscall.SysProcAttr, os.Signal) {}
