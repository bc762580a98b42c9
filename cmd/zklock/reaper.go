package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// The reaper takes the command's whole process group down if zklock dies
// without doing so itself (kill -9, a crash): the kernel's parent-death
// signal reaches only the command, not what the command started, and those
// would run on without the lock while the next holder runs. It is zklock
// itself, re-run as "zklock _reap PGID GRACE" inside the command's process
// group, reading a pipe whose other end only zklock holds: when zklock is
// gone, the read ends, and the reaper sends the group SIGTERM, then SIGKILL
// after the grace (which ends the reaper too, a member of the group). When
// zklock ends normally it kills the reaper first.

const reapCmd = "_reap"

// reaper is a started reaper; stop kills it (the command has exited, or
// zklock is killing the group itself).
type reaper struct {
	cmd  *exec.Cmd
	pipe *os.File // zklock's end: closed only by zklock's death (or stop)
}

// startReaper starts a reaper in the process group pgid. It returns nil if
// it cannot (the command exited already): the parent-death signal still
// stops the command itself.
func startReaper(pgid int, grace time.Duration) *reaper {
	self, err := os.Executable()
	if err != nil {
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	defer r.Close()
	cmd := exec.Command(self, reapCmd, strconv.Itoa(pgid), grace.String())
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil
	}
	return &reaper{cmd: cmd, pipe: w}
}

func (r *reaper) stop() {
	if r == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.pipe.Close()
}

// runReaper is "zklock _reap PGID GRACE": it waits for zklock's end of the
// pipe on stdin to close, then stops the group.
func runReaper(args []string, stderr io.Writer) int {
	if len(args) != 2 {
		return fail(stderr, exitUsage, "%s is zklock exec's helper, not a command", reapCmd)
	}
	pgid, err := strconv.Atoi(args[0])
	grace, gerr := time.ParseDuration(args[1])
	if err != nil || gerr != nil || pgid <= 1 {
		return fail(stderr, exitUsage, "%s: bad arguments %q", reapCmd, args)
	}
	// The signals zklock forwards to the group are the command's business.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	_, _ = io.Copy(io.Discard, os.Stdin) // returns when zklock is gone
	fmt.Fprintf(stderr, "zklock: exec ended without stopping its command; stopping process group %d: SIGTERM now, SIGKILL after %v\n", pgid, grace)
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	time.Sleep(grace)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return exitOK
}
