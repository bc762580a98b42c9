package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill a worker when the coordinator goes.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
