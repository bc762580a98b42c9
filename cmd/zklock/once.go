package main

// exec --once-per: the command as a job run at most once per period
// (zklock.Job), whichever host starts it first.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/zklock/zklock"
)

// jobLock is a job as the lock exec holds: acquiring starts the period's
// run (never waiting), and the run is kept for finish to end.
type jobLock struct {
	job *zklock.Job
	run **zklock.JobRun
}

func (j jobLock) Acquire(ctx context.Context) (*zklock.Lease, error) { return j.TryAcquire(ctx) }

func (j jobLock) TryAcquire(ctx context.Context) (*zklock.Lease, error) {
	r, run, err := j.job.Start(ctx)
	if err != nil {
		return nil, &notThisTime{run, err}
	}
	*j.run = r
	return r.Lease(), nil
}

// notThisTime is a job not run by this call, with the run that covers the
// period (or the last one recorded, while another host holds the lock).
type notThisTime struct {
	run zklock.Run
	err error
}

func (e *notThisTime) Error() string { return e.err.Error() }
func (e *notThisTime) Unwrap() error { return e.err }

// notThisTime reports a job not run (unless --quiet) and returns its exit
// code (--not-run-exit).
func (o *execOpts) notThisTime(err error, stderr io.Writer) int {
	if o.quiet {
		return o.notRunExit
	}
	var n *notThisTime
	run := zklock.Run{}
	if errors.As(err, &n) {
		run = n.run
	}
	if errors.Is(err, zklock.ErrRanThisPeriod) {
		return fail(stderr, o.notRunExit, "not run: %s was run this period (%s) %s", o.path, o.period(), describeRun(run))
	}
	if run.Outcome == "running" {
		return fail(stderr, o.notRunExit, "not run: another host holds %s, running the job: %s", o.path, describeRun(run))
	}
	return fail(stderr, o.notRunExit, "not run: another host holds %s (running the job, or checking the period); last run: %s", o.path, describeRun(run))
}

// describeRun says who ran a job, when, and how it ended.
func describeRun(r zklock.Run) string {
	if r.Outcome == "" {
		return "none recorded"
	}
	who := runner(r.Owner)
	when := "started " + stamp(r.Start)
	switch r.Outcome {
	case "running":
		return fmt.Sprintf("%s, %s, no end recorded (running, or its runner died)", who, when)
	case "reset":
		by := strings.TrimSpace(r.Owner.Name)
		if !strings.HasPrefix(by, "reset by ") {
			by = "reset by " + by
		}
		return fmt.Sprintf("%s (on %s, pid %d) at %s: the next start runs the job", by, r.Owner.Host, r.Owner.PID, stamp(r.End))
	case "failed":
		return fmt.Sprintf("%s, %s, failed at %s (%s): %s", who, when, stamp(r.End), r.Cause, r.Error)
	}
	return fmt.Sprintf("%s, %s, succeeded at %s", who, when, stamp(r.End))
}

// runner names who ran a job: "by web-2 pid 4242 (report)".
func runner(o zklock.Owner) string {
	who := fmt.Sprintf("by %s pid %d", o.Host, o.PID)
	if o.Name != "" {
		who += " (" + o.Name + ")"
	}
	return who
}

// exitText says how the command ended: "exit status 3", or "killed by
// signal 9 (SIGKILL)" (its status 137).
func exitText(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		if name, ok := signalNames[ws.Signal()]; ok {
			return fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), name)
		}
		return fmt.Sprintf("killed by signal %d", int(ws.Signal()))
	}
	return fmt.Sprintf("exit status %d", ps.ExitCode())
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGABRT: "SIGABRT",
	syscall.SIGKILL: "SIGKILL", syscall.SIGSEGV: "SIGSEGV", syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM",
	syscall.SIGTERM: "SIGTERM", syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2", syscall.SIGBUS: "SIGBUS",
}

// stamp is a record's time as zklock prints it: UTC, to the millisecond the
// record keeps, so that every command shows one record's times alike.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// endJob records the end of a --once-per run once the command has exited
// (or, with notRun set, why it did not run): its exit status, the signal
// zklock passed on, or the lease's end (the library tells a lost lease's
// cause). It releases the lock.
func (o *execOpts) endJob(cmd *exec.Cmd, notRun error) {
	outcome := notRun
	cause := ""
	switch {
	case notRun != nil:
	case cmd.ProcessState == nil:
		outcome = errors.New("the command's exit was not seen")
	case !cmd.ProcessState.Success() && o.signalled != nil:
		outcome = fmt.Errorf("stopped by %s passed on from zklock: %s", forwarded[o.signalled], exitText(cmd.ProcessState))
		cause = zklock.CauseSignal
	case !cmd.ProcessState.Success():
		outcome = errors.New(exitText(cmd.ProcessState))
	}
	o.endJobCause(cause, outcome)
}

// endJobCause records a --once-per run's end with the given cause and
// error, and releases the lock. An end that cannot be written (ZooKeeper
// unreachable, or, after a lost lock, another start wrote the record since)
// is reported on stderr: the record then says "no end recorded".
func (o *execOpts) endJobCause(cause string, outcome error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.session)
	defer cancel()
	run, err := o.jobRun.End(ctx, cause, outcome)
	if run.End.IsZero() && o.stderr != nil {
		fmt.Fprintf(o.stderr, "zklock: warning: could not record the end of the run of %s (%s): its record says it started at %s with no end recorded: %s\n",
			o.path, endWord(run), stamp(run.Start), cause0(err))
	}
}

// endWord is how a run ended, for the warning of an end not recorded.
func endWord(r zklock.Run) string {
	if r.Outcome == "failed" {
		return "failed (" + r.Cause + "): " + r.Error
	}
	return r.Outcome
}

// cause0 is why an end was not written; nil says nothing more.
func cause0(err error) string {
	if err == nil {
		return "no write landed"
	}
	return cause(err)
}

// release gives the lock up once the command has exited; a --once-per run
// records its end first (the command's exit status says how it went).
func (o *execOpts) release(lease *zklock.Lease, cmd *exec.Cmd) {
	if o.jobRun == nil {
		release(lease, o.session)
		return
	}
	o.endJob(cmd, nil)
}

// printLastRun adds a job's last run to a path's status, if it has one.
func printLastRun(ctx context.Context, c *zklock.Client, out io.Writer, path string) {
	j, err := c.NewJob(path, time.Millisecond) // reading needs no period
	if err != nil {
		return
	}
	if run, err := j.LastRun(ctx); err == nil && run.Outcome != "" {
		fmt.Fprintf(out, "last run (once per %s): %s\n", runPeriod(run), describeRun(run))
	}
}

// runPeriod names the period a run was made under: its calendar, or its
// duration.
func runPeriod(r zklock.Run) string {
	if r.Calendar != "" {
		return r.Calendar
	}
	return r.Period.String()
}
