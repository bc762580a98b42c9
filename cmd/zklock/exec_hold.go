package main

// How exec holds its lock: the command run under the lease, its signals
// passed on, stopped if the lease ends, and the lock released after it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zklock/zklock"
)

// hold runs the command under the lease and releases the lease after it.
func (o *execOpts) hold(lease *zklock.Lease, sigs <-chan os.Signal, stdout, stderr io.Writer) int {
	token, code := o.confirm(lease, stderr)
	if token == 0 {
		if o.jobRun != nil {
			o.endJob(nil, errors.New("the lock was lost before the command started"))
		}
		return code
	}
	cmd, foreground := o.command(lease, token, stdout, stderr)
	if err := cmd.Start(); err != nil {
		if o.jobRun != nil {
			o.endJob(cmd, fmt.Errorf("cannot run %q: %v", o.argv[0], err))
		} else {
			release(lease, o.session)
		}
		return fail(stderr, exitCannotRun, "cannot run %q: %v", o.argv[0], err)
	}
	stops, unshield := shieldHolder()
	defer unshield()
	g := o.newGroupDeadline(cmd.Process.Pid, lease)
	if o.grants != nil {
		o.grants.onLimit(func() { g.signal(syscall.SIGKILL) })
	}
	r := o.supervise(cmd, lease, g, sigs, stops, stderr)
	o.stopLeftovers(g, lease, stderr) // the reaper stays until the group is empty
	if o.grants != nil {
		o.grants.onLimit(nil)
	}
	g.stop()
	if foreground {
		takeTerminal()
	}
	return o.finish(cmd, lease, r, stderr)
}

// shieldHolder makes sure that nothing zklock does with its terminal or its
// output stops or kills it while it holds the lock for a command: a
// stopped or dead zklock keeps no deadline. A write to a closed pipe fails
// (EPIPE) instead of killing it (SIGPIPE); a background write to a
// terminal with tostop, or a read, does not stop it (SIGTTOU, SIGTTIN); and
// a stop from the terminal (Ctrl-Z, SIGTSTP) is refused: stops delivers it
// to the loop, which says so. It is called once the command has started,
// so that the command keeps the dispositions zklock was given (an ignored
// signal would stay ignored across exec); the reaper sets its own.
func shieldHolder() (stops <-chan os.Signal, undo func()) {
	signal.Ignore(syscall.SIGPIPE, syscall.SIGTTOU, syscall.SIGTTIN)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTSTP)
	return ch, func() { signal.Stop(ch) }
}

// confirm returns the lease's fencing token, or 0 and the exit code after
// reporting that the lock was lost before the command could start.
func (o *execOpts) confirm(lease *zklock.Lease, stderr io.Writer) (int64, int) {
	token, err := lease.Token(context.Background()) // may wait one round trip
	if err == nil {
		err = lease.Err()
	}
	if err != nil {
		return 0, fail(stderr, exitLost, "lost the lock on %s before the command started: %s; run it again", o.path, lossCause(err))
	}
	return token, exitOK
}

// command prepares the command, in its own process group, with the lock in
// its environment; foreground: its group gets the terminal (setProcAttr).
func (o *execOpts) command(lease *zklock.Lease, token int64, stdout, stderr io.Writer) (cmd *exec.Cmd, foreground bool) {
	cmd = exec.Command(o.argv[0], o.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(os.Environ(), // later entries win
		"ZKLOCK_PATH="+o.path,
		"ZKLOCK_NODE="+lease.Node(),
		"ZKLOCK_TOKEN="+strconv.FormatInt(token, 10),
		"ZKLOCK_TOKENS="+o.partTokens(lease))
	return cmd, setProcAttr(cmd)
}

// supervised is how a command's run under the lease ended.
type supervised struct {
	waitErr error // what waiting for the command returned
	lost    error // why the lease ended while the command ran; nil if it held
	killed  bool  // the command outlived its SIGTERM and got a deadline's SIGKILL
	limited bool  // --max-hold: exec stopped the command before the limit
	// killAfter is how long after a loss's (or a request's) SIGTERM the
	// SIGKILL was armed: --grace, or less if the lock could expire sooner.
	killAfter time.Duration
}

// holdStops are the moments, after the grant, at which --max-hold stops the
// command, so that it is dead before the limit frees the lock: SIGTERM
// --grace before the limit (but not before half of it, nor after the
// SIGKILL), SIGKILL a tenth of the limit (at most a second) before it, the
// moment a job's run records its end by the hold limit.
func holdStops(limit, grace time.Duration) (term, kill time.Duration) {
	margin := min(limit/10, time.Second)
	kill = limit - margin
	term = max(limit-grace, limit/2)
	return min(term, kill), kill
}

// supervise waits for the started command to exit. It passes signals on to
// the command's process group and stops the group if the lease ends first:
// SIGTERM at once, SIGKILL after --grace or before the lock may expire
// (groupDeadline). Every signal is sent before its message is written.
func (o *execOpts) supervise(cmd *exec.Cmd, lease *zklock.Lease, g *groupDeadline, sigs, stops <-chan os.Signal, stderr io.Writer) supervised {
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var (
		r        supervised
		leaseUp  = lease.Done()
		asked    <-chan struct{} // --revocable: a request to release
		termSaid bool            // --max-hold's SIGTERM was reported
	)
	if o.revoke {
		asked = lease.RevokeRequested()
	}
	for {
		select {
		case r.waitErr = <-exited:
			termSaid = o.reportPendingNotes(g, stderr) || termSaid // the exit may be read before a note sent earlier
			r.limited, r.killed = g.state()
			if r.limited && !termSaid {
				// The SIGTERM's timer was still between its signal and its
				// note when the exit was read.
				o.reportNote(noteHoldTerm, stderr)
			}
			return r
		case sig := <-sigs:
			o.signalled = sig
			g.signal(sig.(syscall.Signal))
		case <-stops:
			fmt.Fprintf(stderr, "zklock: not stopping (SIGTSTP, Ctrl-Z) while the command holds the lock on %s: the lock would expire while the command ran; stop the command itself, or end it with Ctrl-C\n", o.path)
		case <-asked:
			asked = nil
			g.signal(syscall.SIGTERM)
			kill := g.killAfter(o.grace)
			r.killAfter = kill
			fmt.Fprintf(stderr, "zklock: asked to release the lock on %s; stopping the command: SIGTERM now, SIGKILL after %v\n", o.path, kill.Round(time.Millisecond))
		case <-leaseUp:
			leaseUp = nil
			g.signal(syscall.SIGTERM)
			kill := g.killAfter(o.grace)
			r.lost, r.killAfter = lease.Err(), kill
			o.reportEnd(r.lost, kill, stderr)
		case n := <-g.notes:
			termSaid = o.reportNote(n, stderr) || termSaid
		}
	}
}

// reportEnd says that the lease ended while the command ran, and how the
// command is being stopped (signalled already).
func (o *execOpts) reportEnd(lost error, kill time.Duration, stderr io.Writer) {
	if errors.Is(lost, zklock.ErrHoldLimit) {
		fmt.Fprintf(stderr, "zklock: the command held %s for --max-hold %v; stopping it: SIGTERM now, SIGKILL after %v\n", o.path, o.maxHold, kill.Round(time.Millisecond))
		return
	}
	fmt.Fprintf(stderr, "zklock: lost the lock on %s while the command ran: %s; stopping the command: SIGTERM now, SIGKILL after %v\n",
		o.path, lossCause(lost), kill.Round(time.Millisecond))
}

// reportPendingNotes says what the group's deadlines did that the loop has
// not read yet; it reports whether --max-hold's SIGTERM was among it.
func (o *execOpts) reportPendingNotes(g *groupDeadline, stderr io.Writer) (termSaid bool) {
	for {
		select {
		case n := <-g.notes:
			termSaid = o.reportNote(n, stderr) || termSaid
		default:
			return termSaid
		}
	}
}

// reportNote says what a deadline of the group did (done already); it
// reports whether that was --max-hold's SIGTERM.
func (o *execOpts) reportNote(n groupNote, stderr io.Writer) (termSaid bool) {
	if n != noteHoldTerm {
		return false
	}
	_, kill := holdStops(o.maxHold, o.grace)
	fmt.Fprintf(stderr, "zklock: the command has held %s for %v of --max-hold %v; stopping it before the limit: SIGTERM now, SIGKILL at %v\n",
		o.path, time.Since(o.granted).Round(time.Millisecond), o.maxHold, kill)
	return true
}

// finish settles the lock once the command has exited: it releases the lease
// and returns the command's exit status, or reports the lease lost (76).
func (o *execOpts) finish(cmd *exec.Cmd, lease *zklock.Lease, r supervised, stderr io.Writer) int {
	if r.limited && r.lost == nil {
		// --max-hold stopped the command before the limit: the lock is still
		// held, and released once its end is recorded. Its group is empty
		// (stopLeftovers).
		if r.killed {
			fmt.Fprintf(stderr, "zklock: the command ignored SIGTERM; killed it before the --max-hold limit\n")
		}
		if o.jobRun != nil {
			o.endJobCause(zklock.CauseHoldLimit, fmt.Errorf("stopped by the hold limit: held for %v", o.maxHold))
		} else {
			release(lease, o.session)
		}
		return exitHoldLimit
	}
	if r.lost == nil {
		// Lost just as the command ended: it may have run without the lock.
		if err := lease.Err(); err != nil {
			r.lost = err
			fmt.Fprintf(stderr, "zklock: lost the lock on %s as the command ended: %s\n", o.path, lossCause(r.lost))
		}
	}
	if r.lost != nil {
		// What was left of the command's process group was killed at once
		// (stopLeftovers): it would run unprotected.
		if r.killed {
			fmt.Fprintf(stderr, "zklock: the command ignored SIGTERM for %v; killed it\n", r.killAfter.Round(time.Millisecond))
		}
		if o.jobRun != nil { // the end by the hold limit is recorded already; a loss's if nobody started since
			o.endJob(cmd, nil)
		}
		if errors.Is(r.lost, zklock.ErrHoldLimit) {
			return exitHoldLimit
		}
		return exitLost
	}
	o.release(lease, cmd)
	if cmd.ProcessState == nil {
		return fail(stderr, exitSoftware, "waiting for the command: %v", r.waitErr)
	}
	return exitStatus(cmd.ProcessState)
}

// release gives the lock up. It waits at most one session timeout: if the
// delete cannot get through by then, exiting does as well, since the node
// goes when the session ends.
func release(lease *zklock.Lease, session time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), session)
	defer cancel()
	_ = lease.Release(ctx)
}

func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func signum(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 0
}

// partTokens is ZKLOCK_TOKENS: path=token for each path the lease holds, in
// the order taken, so a command can fence each resource with its own path's
// token. Tokens are known by the time the command starts (confirm read the
// lease's token, which reads every part's).
func (o *execOpts) partTokens(lease *zklock.Lease) string {
	var b strings.Builder
	parts := lease.Parts()
	if len(parts) != len(o.paths) { // --permits k of one semaphore: its highest token
		parts = []*zklock.Lease{lease}
	}
	for i, p := range parts { // one per path, in o.paths' order
		tok, _ := p.Token(context.Background())
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(o.paths[i] + "=" + strconv.FormatInt(tok, 10))
	}
	return b.String()
}

// killWait is how long the leftovers may take to die of SIGKILL before the
// lock is released all the same: a killed process needs the CPU to exit,
// which a loaded machine may withhold for a while.
const killWait = 5 * time.Second

// stopLeftovers stops what the command left running in its process group
// (background children, a command killed by SIGKILL with its children
// alive) before the lock is released, since they would run on without it:
// SIGTERM, then SIGKILL after --grace, or sooner: at the hold limit's
// SIGKILL, before the lock may expire, or at once if the lease ends
// meanwhile (the lock is gone). The reaper stays meanwhile.
func (o *execOpts) stopLeftovers(g *groupDeadline, lease *zklock.Lease, stderr io.Writer) {
	if !g.othersAlive() {
		return // the group is empty
	}
	g.signal(syscall.SIGTERM)
	kill := g.killAfter(o.grace)
	fmt.Fprintf(stderr, "zklock: the command exited leaving processes in its process group %d; stopping them before releasing %s: SIGTERM now, SIGKILL after %v\n",
		g.pgid, o.path, kill.Round(time.Millisecond))
	leaseUp := lease.Done()
	tick := time.NewTicker(50 * time.Millisecond) // each look reads /proc
	defer tick.Stop()
	var killed time.Time // when the SIGKILL was seen sent
	for g.othersAlive() {
		select {
		case <-leaseUp:
			leaseUp = nil
			g.killBy(time.Now())
		case <-tick.C:
		}
		if _, k := g.state(); k && killed.IsZero() {
			// The SIGKILL is due: send it from here too, since its timer
			// and the reaper may both run late on a loaded machine, and
			// count the wait from a signal known sent.
			g.killNow()
			killed = time.Now()
		}
		if !killed.IsZero() && time.Since(killed) > killWait {
			// SIGKILL takes effect when a process leaves uninterruptible
			// sleep: nothing more can be done from here.
			fmt.Fprintf(stderr, "zklock: processes of group %d outlived SIGKILL by %v (uninterruptible sleep?); releasing %s all the same\n", g.pgid, killWait, o.path)
			return
		}
	}
}
