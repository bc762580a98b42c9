//go:build !linux

package main

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the command in its own process group.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
