package main

import (
	"bytes"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
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
// SIGTTOU for the call, which would stop it otherwise (shieldHolder has it
// ignored already while a command runs).
func takeTerminal() {
	signal.Ignore(syscall.SIGTTOU)
	pgrp := int32(syscall.Getpgrp())
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&pgrp)))
}

// groupMembers lists the live processes (not zombies) of process group
// pgid, from /proc; ok is false if /proc cannot be read.
func groupMembers(pgid int) (pids []int, ok bool) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, false
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, false
	}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if g, live := procGroup(pid); live && g == pgid {
			pids = append(pids, pid)
		}
	}
	return pids, true
}

// procGroup reads a process's group from /proc/PID/stat; live is false for
// a zombie or a process gone.
func procGroup(pid int) (pgrp int, live bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return 0, false
	}
	pgrp, err = strconv.Atoi(string(f[2]))
	return pgrp, err == nil
}
