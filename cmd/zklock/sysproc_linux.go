package main

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"unsafe"
)

// setProcAttr puts the command in its own process group, and has the kernel
// send it SIGTERM if zklock dies first: its lock goes with zklock's session.
// When zklock runs in the foreground of a terminal, the command's group
// becomes the terminal's foreground instead, so that the command can read
// the terminal, as under flock(1); takeTerminal gives it back to zklock.
func setProcAttr(cmd *exec.Cmd) (foreground bool) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if cmd.Stdin != os.Stdin || !inForeground() {
		return false
	}
	// The child sets itself as the foreground between fork and exec, with
	// its signals blocked, so SIGTTOU does not stop it; fd 0 is the
	// terminal in the child as in zklock.
	cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, 0
	return true
}

// inForeground reports whether stdin is a terminal whose foreground process
// group is zklock's.
func inForeground() bool {
	fg, err := ttyPgrp()
	return err == nil && fg == syscall.Getpgrp()
}

func ttyPgrp() (int, error) {
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return 0, errno
	}
	return int(pgrp), nil
}

// takeTerminal makes zklock's process group the terminal's foreground again,
// after the command's. zklock is in the background meanwhile, so it ignores
// SIGTTOU for the call, which would stop it otherwise.
func takeTerminal() {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := int32(syscall.Getpgrp())
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&pgrp)))
}
