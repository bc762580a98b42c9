package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zklock/zklock"
)

var execCmd = &command{
	name:    "exec",
	summary: "run a command while holding a lock, waiting for its turn",
	usage: `Usage: zklock exec [flags] <lock path> [--] <command> [args...]

Exec waits for its turn on the lock at <lock path> (first come, first served,
across every client of the path), runs the command while holding the lock,
releases it when the command exits, and exits with the command's status.

The command runs in its own process group, with these added to its
environment:

	ZKLOCK_PATH   the lock path
	ZKLOCK_NODE   the lock node this holder created
	ZKLOCK_TOKEN  the fencing token: larger for every later holder of the path

SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to zklock are passed on to the
command's process group, and the lock is released once the command has exited.
While zklock is still waiting, these signals make it leave the queue and exit.
Being in its own process group, the command cannot read from a terminal.

If the lock is lost while the command runs (its ZooKeeper session expired, or
its node was deleted, e.g. by 'zklock break'), zklock sends SIGTERM to the
command's process group, then SIGKILL after --grace (or as soon as the command
itself has exited), and exits 76. A holder can lose the lock without hearing
of it in time (a paused machine), so a command that writes to a shared
resource should pass ZKLOCK_TOKEN along and have the resource reject tokens
lower than the highest it has seen. If zklock itself is killed, ZooKeeper
frees the lock when its session times out; on Linux the command (not its own
children) then receives SIGTERM.

Exit status:

	the command's own exit status, or 128+N if signal N killed it
	2      usage error (unknown flag, invalid lock path, missing command)
	69     ZooKeeper could not be reached within --connect-timeout
	70     zklock failed for another reason (e.g. ZooKeeper refused a request)
	73     --try: the lock is held, or others wait for it
	75     --timeout expired before the lock was acquired
	76     the lock was lost while the command ran; the command was stopped
	126    the command cannot be run
	127    the command was not found
	128+N  zklock received signal N while still waiting for the lock

Examples:

	zklock exec /locks/backup -- ./backup.sh --full
	zklock exec --timeout 5m /locks/deploy -- make deploy
	zklock exec --try /locks/report -- ./report.sh || echo "report already running"
`,
	flags: func(fs *flag.FlagSet) {
		addConnFlags(fs)
		fs.Duration("timeout", 0, "give up (exit 75) if the lock is not acquired within this `duration`; 0 waits for ever")
		fs.Bool("try", false, "do not wait: exit 73 at once if the lock is held or others wait for it")
		fs.Duration("session-timeout", zklock.DefaultSessionTimeout, "ZooKeeper session timeout (a `duration`): how long an unreachable holder keeps the lock")
		fs.Duration("grace", 10*time.Second, "after losing the lock, how long the command gets between SIGTERM and SIGKILL (a `duration`)")
		fs.String("owner", "", "`name` recorded in the lock node for 'zklock status' (default: the command's base name)")
		fs.Bool("verbose", false, "log ZooKeeper session events to stderr")
	},
	parse: parseExecArgs,
	run:   runExec,
}

// parseExecArgs takes flags before the lock path and between it and the
// command; everything from the command on is the command's own.
func parseExecArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return nil, nil
	}
	if err := fs.Parse(rest[1:]); err != nil {
		return nil, err
	}
	return append([]string{rest[0]}, fs.Args()...), nil
}

// forwarded are the signals passed on to the command.
var forwarded = map[os.Signal]string{
	syscall.SIGINT:  "SIGINT",
	syscall.SIGTERM: "SIGTERM",
	syscall.SIGHUP:  "SIGHUP",
	syscall.SIGQUIT: "SIGQUIT",
}

var errTimedOut = errors.New("--timeout expired")

type execOpts struct {
	conn    *connFlags
	path    string
	argv    []string
	timeout time.Duration
	try     bool
	session time.Duration
	grace   time.Duration
	owner   string
	verbose bool
}

func runExec(fset *flag.FlagSet, pos []string, stdout, stderr io.Writer) int {
	o := execOpts{
		conn:    connFlagsOf(fset),
		timeout: flagValue[time.Duration](fset, "timeout"),
		try:     flagValue[bool](fset, "try"),
		session: flagValue[time.Duration](fset, "session-timeout"),
		grace:   flagValue[time.Duration](fset, "grace"),
		owner:   flagValue[string](fset, "owner"),
		verbose: flagValue[bool](fset, "verbose"),
	}
	switch {
	case len(pos) == 0:
		return usageError(stderr, "exec", "missing the lock path and the command")
	case len(pos) == 1:
		return usageError(stderr, "exec", "missing the command to run after the lock path %s", pos[0])
	case o.conn.check() != "":
		return usageError(stderr, "exec", "%s", o.conn.check())
	case o.timeout < 0:
		return usageError(stderr, "exec", "--timeout must not be negative")
	case o.session <= 0:
		return usageError(stderr, "exec", "--session-timeout must be positive")
	case o.grace < 0:
		return usageError(stderr, "exec", "--grace must not be negative")
	}
	o.path, o.argv = pos[0], pos[1:]
	if err := checkPath(o.path); err != nil {
		return usageError(stderr, "exec", "%s", badPath(err))
	}
	// Resolve the command first: a typo must not wait its turn in the queue.
	if _, err := exec.LookPath(o.argv[0]); err != nil {
		code := exitCannotRun
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = exitNotFound
		}
		var ee *exec.Error
		if errors.As(err, &ee) {
			err = ee.Err
		}
		return fail(stderr, code, "cannot run %q: %v; check the command's name and $PATH", o.argv[0], err)
	}
	if o.owner == "" {
		o.owner = filepath.Base(o.argv[0])
	}

	sigs := make(chan os.Signal, 8)
	for s := range forwarded {
		signal.Notify(sigs, s)
	}
	defer signal.Stop(sigs)

	client, lease, code := o.acquire(sigs, stderr)
	if client == nil {
		return code
	}
	defer closeClient(client)
	return o.hold(lease, sigs, stdout, stderr)
}

// acquire connects and waits for the lock. It returns the client and lease,
// or a nil client and the exit code after reporting the failure.
func (o *execOpts) acquire(sigs <-chan os.Signal, stderr io.Writer) (*zklock.Client, *zklock.Lease, int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if o.timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, o.timeout, errTimedOut)
		defer stop()
	}
	opts := []zklock.Option{zklock.WithSessionTimeout(o.session)}
	if o.verbose {
		opts = append(opts, zklock.WithLogger(slog.New(slog.NewTextHandler(stderr, nil))))
	}
	type result struct {
		client *zklock.Client
		lease  *zklock.Lease
		err    error
	}
	done := make(chan result, 1)
	go func() {
		client, err := o.conn.connect(ctx, opts...)
		if err != nil {
			done <- result{err: err}
			return
		}
		m, err := client.NewMutex(o.path)
		var lease *zklock.Lease
		if err == nil {
			actx := zklock.WithOwner(ctx, o.owner)
			if o.try {
				lease, err = m.TryAcquire(actx)
			} else {
				lease, err = m.Acquire(actx)
			}
		}
		done <- result{client, lease, err}
	}()

	var r result
	select {
	case r = <-done:
	case sig := <-sigs:
		cancel() // Acquire removes our queue node before it returns
		r = <-done
		if r.client != nil {
			closeClient(r.client) // releases the lease if we got it meanwhile
		}
		return nil, nil, fail(stderr, 128+signum(sig), "stopped by %s while waiting for %s", forwarded[sig], o.path)
	}
	timedOut := errors.Is(context.Cause(ctx), errTimedOut)
	switch {
	case r.err == nil:
		return r.client, r.lease, 0
	case r.client == nil && timedOut:
		return nil, nil, fail(stderr, exitTimeout, "timed out after %v waiting for %s (no ZooKeeper session yet); check --servers or $%s", o.timeout, o.path, envServers)
	case r.client == nil:
		return nil, nil, fail(stderr, exitUnavailable, "%s", o.conn.unreachable(r.err))
	}
	defer closeClient(r.client)
	switch {
	case errors.Is(r.err, zklock.ErrLocked):
		return nil, nil, fail(stderr, exitLocked, "lock is held: %s is taken or has waiters; drop --try to wait for it, or see who holds it with 'zklock status %s'", o.path, o.path)
	case timedOut:
		return nil, nil, fail(stderr, exitTimeout, "timed out after %v waiting for %s; see who holds it with 'zklock status %s'", o.timeout, o.path, o.path)
	default:
		return nil, nil, fail(stderr, exitSoftware, "cannot acquire %s: %s", o.path, cause(r.err))
	}
}

// hold runs the command under the lease and releases the lease after it.
func (o *execOpts) hold(lease *zklock.Lease, sigs <-chan os.Signal, stdout, stderr io.Writer) int {
	token := lease.Token() // may wait one round trip; 0 means the lease is lost
	if token == 0 {
		select { // the lease's monitor is about to end it
		case <-lease.Done():
		case <-time.After(5 * time.Second):
		}
	}
	if err := lease.Err(); err != nil || token == 0 {
		why := "its lock node could not be read"
		if err != nil {
			why = lossCause(err)
		}
		return fail(stderr, exitLost, "lost the lock on %s before the command started: %s; run it again", o.path, why)
	}
	cmd := exec.Command(o.argv[0], o.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(os.Environ(), // later entries win
		"ZKLOCK_PATH="+o.path,
		"ZKLOCK_NODE="+lease.Node(),
		"ZKLOCK_TOKEN="+strconv.FormatInt(token, 10))
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		release(lease, o.session)
		return fail(stderr, exitCannotRun, "cannot run %q: %v", o.argv[0], err)
	}
	pgid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var (
		waitErr error
		lost    error
		leaseUp = lease.Done()
		killAt  <-chan time.Time
		killed  bool
	)
wait:
	for {
		select {
		case waitErr = <-exited:
			break wait
		case sig := <-sigs:
			_ = syscall.Kill(-pgid, sig.(syscall.Signal))
		case <-leaseUp:
			leaseUp = nil
			lost = lease.Err()
			fmt.Fprintf(stderr, "zklock: lost the lock on %s while the command ran: %s; stopping the command: SIGTERM now, SIGKILL after %v\n",
				o.path, lossCause(lost), o.grace)
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			killAt = time.After(o.grace)
		case <-killAt:
			killAt = nil
			killed = true
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	if lost == nil {
		// Lost just as the command ended: it may have run without the lock.
		if err := lease.Err(); err != nil {
			lost = err
			fmt.Fprintf(stderr, "zklock: lost the lock on %s as the command ended: %s\n", o.path, lossCause(lost))
		}
	}
	if lost != nil {
		// Whatever is left of the command's process group runs unprotected.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		if killed {
			fmt.Fprintf(stderr, "zklock: the command ignored SIGTERM for %v; killed it\n", o.grace)
		}
		return exitLost
	}
	release(lease, o.session)
	if cmd.ProcessState == nil {
		return fail(stderr, exitSoftware, "waiting for the command: %v", waitErr)
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

// closeClient closes c. Close is bounded by the client's cleanup timeout:
// deletes that cannot get through a partition end with the session.
func closeClient(c *zklock.Client) { c.Close() }

// lossCause renders why a lease ended, without the sentinel's words.
func lossCause(err error) string {
	return strings.TrimPrefix(cause(err), "lock lost: ")
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
