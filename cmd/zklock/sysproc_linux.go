package main

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the command in its own process group, and has the kernel
// send it SIGTERM if zklock dies first: its lock goes with zklock's session.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
