//go:build !linux

package main

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the command in its own process group. Handing it the
// terminal is implemented on Linux only.
func setProcAttr(cmd *exec.Cmd) (foreground bool) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return false
}

func takeTerminal() {}

// groupMembers cannot list a process group here.
func groupMembers(int) ([]int, bool) { return nil, false }
