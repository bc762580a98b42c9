package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The reaper takes the command's whole process group down if zklock dies
// or freezes without doing so itself (kill -9, a crash, SIGSTOP): the
// kernel's parent-death signal reaches only the command, not what the
// command started, and those would run on without the lock while the next
// holder runs. It is zklock itself, re-run as "zklock _reap PGID GRACE
// SLACK" inside the command's process group, reading a pipe whose other
// end only zklock holds. zklock writes on it the moment by which the group
// must be dead (groupDeadline.bound: shortly before the session could
// expire, the hold limit's SIGKILL, an armed SIGKILL), as Unix nanoseconds
// (the machine's wall clock, which both read), each time it changes.
//
//   - When zklock is gone, the read ends: the reaper sends the group
//     SIGTERM, then SIGKILL after the grace or at the last moment it was
//     told, less SLACK (the lease's own loss deadline), whichever is first.
//     The SIGKILL ends the reaper too, a member of the group.
//   - When that moment passes with nothing newer said (zklock is stopped,
//     or stuck), the reaper sends the group SIGKILL: the lock may be gone.
//
// When zklock ends normally it kills the reaper once the group is empty.

const reapCmd = "_reap"

// reaperDelayEnv delays the reaper's start by a duration, for the test of a
// reaper still starting when the group is signalled; not for users.
const reaperDelayEnv = "ZKLOCK_TEST_REAPER_DELAY"

// reaper is a started reaper; stop kills it.
type reaper struct {
	cmd   *exec.Cmd
	pipe  *os.File      // zklock's end: closed only by zklock's death (or stop)
	ready chan struct{} // closed once the reaper ignores the group's signals
	mu    sync.Mutex
	done  bool
}

// startReaper starts a reaper in the process group pgid. It returns nil if
// it cannot (the command exited already): the parent-death signal still
// stops the command itself. It returns once the reaper ignores the signals
// zklock sends the group, or after slack: a reaper still starting when the
// hold limit's SIGTERM reached the group died of it (a loaded machine took
// 0.7 s to start it), and zklock killed then left a leftover for good.
func startReaper(pgid int, grace, slack time.Duration) *reaper {
	self, err := os.Executable()
	if err != nil {
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	defer r.Close()
	ready, readyW, err := os.Pipe()
	if err != nil {
		w.Close()
		return nil
	}
	cmd := exec.Command(self, reapCmd, strconv.Itoa(pgid), grace.String(), slack.String())
	cmd.Stdin = r
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{readyW} // fd 3: closed once the signals are ignored
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		ready.Close()
		w.Close()
		return nil
	}
	rp := &reaper{cmd: cmd, pipe: w, ready: make(chan struct{})}
	go func() {
		defer close(rp.ready)
		defer ready.Close()
		_, _ = ready.Read(make([]byte, 1)) // EOF when ready, or the reaper's death
	}()
	select {
	case <-rp.ready:
	case <-time.After(slack):
	}
	return rp
}

// isReady reports whether the reaper ignores the group's signals by now
// (true when there is none).
func (r *reaper) isReady() bool {
	if r == nil {
		return true
	}
	select {
	case <-r.ready:
		return true
	default:
		return false
	}
}

// reaperReady tells zklock that the reaper ignores the group's signals: it
// closes the pipe zklock waits on (fd 3).
func reaperReady() {
	if f := os.NewFile(3, "ready"); f != nil {
		f.Close()
	}
}

// feed tells the reaper the moment by which the group must be dead. The
// pipe holds far more than zklock ever writes unread, so it never blocks
// for long.
func (r *reaper) feed(by time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done {
		// The moment itself (wall clock, the machine's own for both), not a
		// duration: a reaper slow to start reads it late, and a duration
		// read then would push the deadline out by that delay.
		_, _ = fmt.Fprintf(r.pipe, "%d\n", by.UnixNano())
	}
}

// pid is the reaper's process id, 0 if there is none.
func (r *reaper) pid() int {
	if r == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

func (r *reaper) stop() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.done = true
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.pipe.Close()
}

// runReaper is "zklock _reap PGID GRACE SLACK": it keeps the group's
// deadline that zklock feeds on stdin, and stops the group when zklock is
// gone or the deadline passes.
func runReaper(args []string, stderr io.Writer) int {
	if len(args) != 3 {
		return fail(stderr, exitUsage, "%s is zklock exec's helper, not a command", reapCmd)
	}
	pgid, err := strconv.Atoi(args[0])
	grace, gerr := time.ParseDuration(args[1])
	slack, serr := time.ParseDuration(args[2])
	if err != nil || gerr != nil || serr != nil || pgid <= 1 {
		return fail(stderr, exitUsage, "%s: bad arguments %q", reapCmd, args)
	}
	// A reaper slow to start, as on a loaded machine (tests only).
	if d, err := time.ParseDuration(os.Getenv(reaperDelayEnv)); err == nil {
		time.Sleep(d)
	}
	// The signals zklock forwards to the group are the command's business,
	// and nothing the terminal or a closed pipe does may stop the reaper.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE)
	reaperReady()
	bounds, gone := readBounds(os.Stdin)
	var by time.Time // zero until zklock said
	watch := time.NewTimer(time.Hour)
	watch.Stop()
	for {
		select {
		case d := <-bounds:
			by = time.Now().Add(d)
			watch.Reset(d)
		case <-watch.C: // zklock said nothing newer in time: stopped, or stuck
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return exitOK
		case <-gone:
			return reapAfterDeath(pgid, grace, by, slack, stderr)
		}
	}
}

// readBounds reads the moments zklock writes, as durations from now; gone closes when zklock's
// end is closed, after the last duration was taken.
func readBounds(in io.Reader) (<-chan time.Duration, <-chan struct{}) {
	bounds, gone := make(chan time.Duration), make(chan struct{})
	go func() {
		defer close(gone)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			if n, err := strconv.ParseInt(sc.Text(), 10, 64); err == nil {
				bounds <- time.Until(time.Unix(0, n)) // < 0: passed already
			}
		}
	}()
	return bounds, gone
}

// reapAfterDeath stops the group of a zklock that died: SIGTERM now,
// SIGKILL after the grace or at the lease's loss deadline (by less slack),
// whichever is first. Signal first, write after.
func reapAfterDeath(pgid int, grace time.Duration, by time.Time, slack time.Duration, stderr io.Writer) int {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	wait := grace
	if !by.IsZero() {
		wait = max(min(wait, time.Until(by.Add(-slack))), 0)
	}
	fmt.Fprintf(stderr, "zklock: exec ended without stopping its command; stopping process group %d: SIGTERM sent, SIGKILL in %v\n", pgid, wait.Round(time.Millisecond))
	time.Sleep(wait)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return exitOK
}
