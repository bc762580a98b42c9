package dbserver

import (
	"os"
	"syscall"
)

// setPdeathsig has the kernel send sig to the server when the thread that
// started it (in practice, the test binary) goes away.
func setPdeathsig(a *syscall.SysProcAttr, sig os.Signal) { a.Pdeathsig = sig.(syscall.Signal) }
