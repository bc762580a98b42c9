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
	reap := startReaper(cmd.Process.Pid, o.grace)
	r := o.supervise(cmd, lease, sigs, stderr)
	reap.stop() // the command has exited: what it left is stopped below
	o.stopLeftovers(cmd.Process.Pid, stderr)
	if foreground {
		takeTerminal()
	}
	return o.finish(cmd, lease, r, stderr)
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
	killed  bool  // the command outlived --grace after SIGTERM and got SIGKILL
	limited bool  // --max-hold: exec stopped the command before the limit
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
// SIGTERM at once, SIGKILL after --grace.
func (o *execOpts) supervise(cmd *exec.Cmd, lease *zklock.Lease, sigs <-chan os.Signal, stderr io.Writer) supervised {
	pgid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var (
		r       supervised
		leaseUp = lease.Done()
		killAt  <-chan time.Time
		asked   <-chan struct{} // --revocable: a request to release
		// --max-hold: stop the command before the limit frees the lock
		limitTerm, limitKill <-chan time.Time
	)
	if o.revoke {
		asked = lease.RevokeRequested()
	}
	if o.maxHold > 0 {
		term, kill := holdStops(o.maxHold, o.grace)
		limitTerm = time.After(time.Until(o.granted.Add(term)))
		limitKill = time.After(time.Until(o.granted.Add(kill)))
	}
	for {
		select {
		case r.waitErr = <-exited:
			return r
		case sig := <-sigs:
			o.signalled = sig
			_ = syscall.Kill(-pgid, sig.(syscall.Signal))
		case <-asked:
			asked = nil
			fmt.Fprintf(stderr, "zklock: asked to release the lock on %s; stopping the command: SIGTERM now, SIGKILL after %v\n", o.path, o.grace)
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			killAt = time.After(o.grace)
		case <-leaseUp:
			leaseUp = nil
			r.lost = lease.Err()
			if errors.Is(r.lost, zklock.ErrHoldLimit) {
				fmt.Fprintf(stderr, "zklock: the command held %s for --max-hold %v; stopping it: SIGTERM now, SIGKILL after %v\n", o.path, o.maxHold, o.grace)
			} else {
				fmt.Fprintf(stderr, "zklock: lost the lock on %s while the command ran: %s; stopping the command: SIGTERM now, SIGKILL after %v\n",
					o.path, lossCause(r.lost), o.grace)
			}
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			killAt = time.After(o.grace)
		case <-killAt:
			killAt = nil
			r.killed = true
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		case <-limitTerm:
			limitTerm = nil
			r.limited = true
			_, kill := holdStops(o.maxHold, o.grace)
			fmt.Fprintf(stderr, "zklock: the command has held %s for %v of --max-hold %v; stopping it before the limit: SIGTERM now, SIGKILL at %v\n",
				o.path, time.Since(o.granted).Round(time.Millisecond), o.maxHold, kill)
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
		case <-limitKill:
			limitKill = nil
			r.limited, r.killed = true, true
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
}

// finish settles the lock once the command has exited: it releases the lease
// and returns the command's exit status, or reports the lease lost (76).
func (o *execOpts) finish(cmd *exec.Cmd, lease *zklock.Lease, r supervised, stderr io.Writer) int {
	if r.limited && r.lost == nil {
		// --max-hold stopped the command before the limit: the lock is still
		// held, and released once its end is recorded.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
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
		// Whatever is left of the command's process group runs unprotected.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if r.killed {
			fmt.Fprintf(stderr, "zklock: the command ignored SIGTERM for %v; killed it\n", o.grace)
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

// stopLeftovers stops what the command left running in its process group
// (background children, a command killed by SIGKILL with its children
// alive) before the lock is released, since they would run on without it:
// SIGTERM, then SIGKILL after --grace if any is still there.
func (o *execOpts) stopLeftovers(pgid int, stderr io.Writer) {
	if syscall.Kill(-pgid, 0) != nil {
		return // the group is empty
	}
	fmt.Fprintf(stderr, "zklock: the command exited leaving processes in its process group %d; stopping them before releasing %s: SIGTERM now, SIGKILL after %v\n", pgid, o.path, o.grace)
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.Now().Add(o.grace)
	for time.Now().Before(deadline) {
		if syscall.Kill(-pgid, 0) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
