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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock"
)

var execCmd = &command{
	name:    "exec",
	summary: "run a command while holding a lock, waiting for its turn",
	usage: `Usage: zklock exec [flags] <lock path> [--] <command> [args...]

Exec waits for its turn on the lock at <lock path> (first come, first served,
across every client of the path), runs the command while holding the lock,
releases it when the command exits, and exits with the command's status.

By default the lock is exclusive. --read takes it as a reader of a
read/write lock (readers share, writers exclude them), --write as its
writer (needed to exclude Curator's readers, which do not treat a plain
mutex as a writer; add --kazoo to name the nodes as kazoo does, whose
readers recognise only kazoo's writers), --semaphore N as one of N holders
of a semaphore. --and <lock path>, repeated, adds paths: exec takes all of
them, in sorted order so that no two clients deadlock, as one lease.

The command runs in its own process group, with these added to its
environment:

	ZKLOCK_PATH   the lock path (several: comma-separated, in the order taken)
	ZKLOCK_NODE   the lock node this holder created (several: comma-separated)
	ZKLOCK_TOKEN  the fencing token: larger for every later holder of the path
	              (several paths: the largest of their tokens)
	ZKLOCK_TOKENS each path's own token, path=token,... in the order taken
	              (one path: the same as ZKLOCK_TOKEN)

SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to zklock are passed on to the
command's process group, and the lock is released once the command has exited.
While zklock is still waiting, these signals make it leave the queue and exit.
Being in its own process group, the command cannot read from a terminal.

--value V campaigns in an election on the path (the same lock, shared with
Curator's LeaderSelector) and publishes V, an address say, with its owner
record while the command runs: 'zklock leader <path>' shows who leads and V.

With --revocable, a request to release ('zklock break --ask', Curator's
Revoker) stops the command the same way (SIGTERM, then SIGKILL after
--grace); the lock is released once it has exited, and zklock exits with
its status.

If the lock is lost while the command runs (its ZooKeeper session expired, or
its node was deleted, e.g. by 'zklock break'), zklock sends SIGTERM to the
command's process group, then SIGKILL after --grace (or as soon as the command
itself has exited), and exits 76. A holder can lose the lock without hearing
of it in time (a paused machine), so a command that writes to a shared
resource should pass ZKLOCK_TOKEN along and have the resource reject tokens
lower than the highest it has seen. If zklock itself is killed, ZooKeeper
frees the lock when its session times out, and the command's whole process
group receives SIGTERM, then SIGKILL after --grace.

Exit status:

	the command's own exit status, or 128+N if signal N killed it
	2      usage error (unknown flag, invalid lock path, missing command), or
	       the path is used by another recipe (another library's, or another
	       kind of zklock lock: --read on a --semaphore path, say), which would
	       not see this lock's node; the message names the node and its recipe
	69     ZooKeeper could not be reached: no session within --connect-timeout
	       (with --try, at most 3s), or contact lost while waiting; the
	       message names the cause (refused, not ZooKeeper, no answer).
	       An outage is 69 even when --timeout expires meanwhile.
	70     zklock failed for another reason (e.g. ZooKeeper refused a request)
	73     --try: the lock is held, or others wait for it
	75     --timeout expired while the lock was held by others
	76     the lock was lost while the command ran; the command was stopped
	126    the command cannot be run
	127    the command was not found
	128+N  zklock received signal N while still waiting for the lock

Examples:

	zklock exec /locks/backup -- ./backup.sh --full
	zklock exec --timeout 5m /locks/deploy -- make deploy
	zklock exec --try /locks/report -- ./report.sh || echo "report already running"
	zklock exec --read /locks/catalog -- ./export.sh
	zklock exec --semaphore 4 /locks/encoders -- ./encode.sh input.mov
	zklock exec /locks/db --and /locks/cache -- ./migrate.sh
`,
	flags: func(fs *flag.FlagSet) {
		addConnFlags(fs)
		fs.Duration("timeout", 0, "give up (exit 75) if the lock is not acquired within this `duration`; 0 waits for ever")
		fs.Bool("try", false, "do not wait: exit 73 at once if the lock is held or others wait for it (and 69 within 3s if ZooKeeper cannot be reached)")
		fs.Duration("session-timeout", zklock.DefaultSessionTimeout, "ZooKeeper session timeout (a `duration`): how long an unreachable holder keeps the lock")
		fs.Duration("grace", 10*time.Second, "after losing the lock, how long the command gets between SIGTERM and SIGKILL (a `duration`)")
		fs.String("owner", "", "`name` recorded in the lock node for 'zklock status' (default: the command's base name)")
		fs.Bool("verbose", false, "log ZooKeeper session events to stderr")
		fs.Bool("read", false, "take the lock as a reader of a read/write lock")
		fs.Bool("write", false, "take the lock as the writer of a read/write lock")
		fs.Int("semaphore", 0, "take one of `N` leases of a semaphore (0: an exclusive lock)")
		fs.Bool("kazoo", false, "with --read or --write: name the nodes as kazoo's ReadLock and WriteLock do")
		fs.String("value", "", "campaign as the leader of an election with this `value` ('zklock leader <path>' shows it): an exclusive lock that publishes it")
		fs.Bool("revocable", false, "stop the command (SIGTERM, SIGKILL after --grace) and release when asked to ('zklock break --ask', Curator's Revoker)")
		fs.Var(&pathList{}, "and", "also take the lock at this `path` (repeatable): all paths are taken together, as one lease")
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

// pathList is the value of the repeatable --and flag.
type pathList []string

func (p *pathList) String() string     { return strings.Join(*p, ",") }
func (p *pathList) Set(v string) error { *p = append(*p, v); return nil }
func (p *pathList) Get() any           { return []string(*p) }

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
	paths   []string
	path    string // the paths, comma-separated, for messages and ZKLOCK_PATH
	argv    []string
	timeout time.Duration
	try     bool
	session time.Duration
	grace   time.Duration
	owner   string
	verbose bool
	read    bool
	write   bool
	kazoo   bool
	permits int
	// permitsSet: --semaphore was given (0 is then an error, not "exclusive").
	permitsSet bool
	revoke     bool   // --revocable
	value      string // --value: campaign in an election
}

func runExec(fset *flag.FlagSet, pos []string, stdout, stderr io.Writer) int {
	o, code := execOptsOf(fset, pos, stderr)
	if o == nil {
		return code
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

// execOptsOf reads exec's flags and arguments. It returns nil and the exit
// code after reporting a usage error or a command that cannot run.
func execOptsOf(fset *flag.FlagSet, pos []string, stderr io.Writer) (*execOpts, int) {
	o := &execOpts{
		conn:    connFlagsOf(fset),
		timeout: flagValue[time.Duration](fset, "timeout"),
		try:     flagValue[bool](fset, "try"),
		session: flagValue[time.Duration](fset, "session-timeout"),
		grace:   flagValue[time.Duration](fset, "grace"),
		owner:   flagValue[string](fset, "owner"),
		verbose: flagValue[bool](fset, "verbose"),
		read:    flagValue[bool](fset, "read"),
		write:   flagValue[bool](fset, "write"),
		permits: flagValue[int](fset, "semaphore"),
		kazoo:   flagValue[bool](fset, "kazoo"),
		revoke:  flagValue[bool](fset, "revocable"),
		value:   flagValue[string](fset, "value"),
	}
	fset.Visit(func(f *flag.Flag) { o.permitsSet = o.permitsSet || f.Name == "semaphore" })
	if len(pos) > 0 {
		o.paths, o.argv = append([]string{pos[0]}, flagValue[[]string](fset, "and")...), pos[1:]
	}
	if msg := o.check(); msg != "" {
		return nil, usageError(stderr, "exec", "%s", msg)
	}
	for _, p := range o.paths {
		if msg := badPath(p); msg != "" {
			return nil, usageError(stderr, "exec", "%s", msg)
		}
	}
	o.paths = slices.Compact(slices.Sorted(slices.Values(o.paths))) // the order they are taken in
	o.path = strings.Join(o.paths, ",")
	// Resolve the command first: a typo must not wait its turn in the queue.
	if code, err := lookCommand(o.argv[0]); err != nil {
		return nil, fail(stderr, code, "cannot run %q: %v; check the command's name and $PATH", o.argv[0], err)
	}
	if o.owner == "" {
		o.owner = filepath.Base(o.argv[0])
	}
	return o, exitOK
}

// check validates the flags and the number of arguments; it returns a usage
// message or "".
func (o *execOpts) check() string {
	kinds := 0
	for _, on := range []bool{o.read, o.write, o.permits != 0} {
		if on {
			kinds++
		}
	}
	switch {
	case len(o.paths) == 0:
		return "missing the lock path and the command"
	case len(o.argv) == 0:
		return fmt.Sprintf("missing the command to run after the lock path %s", strings.Join(o.paths, " "))
	case kinds > 1:
		return "--read, --write and --semaphore exclude each other"
	case o.permits < 0, o.permitsSet && o.permits == 0:
		return "--semaphore must be at least 1 (leave it out for an exclusive lock)"
	case o.value != "" && (kinds > 0 || len(o.paths) > 1 || o.try):
		return "--value campaigns for one path as an exclusive lock: it excludes --read, --write, --semaphore, --and and --try"
	case kinds > 0 && len(o.paths) > 1:
		return "--read, --write and --semaphore take one lock path; paths added with --and are exclusive locks"
	case o.kazoo && !o.read && !o.write:
		return "--kazoo names read/write lock nodes: use it with --read or --write"
	case o.conn.check() != "":
		return o.conn.check()
	case o.timeout < 0:
		return "--timeout must not be negative"
	case o.session <= 0:
		return "--session-timeout must be positive"
	case o.grace < 0:
		return "--grace must not be negative"
	}
	return ""
}

// lookCommand finds the command as exec would. If it cannot, it returns the
// exit code (127 not found, 126 not runnable) and why.
func lookCommand(name string) (int, error) {
	_, err := exec.LookPath(name)
	if err == nil {
		return exitOK, nil
	}
	code := exitCannotRun
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		code = exitNotFound
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		err = ee.Err
	}
	return code, err
}

// acquired is the outcome of connecting and acquiring the lock.
type acquired struct {
	client *zklock.Client
	lease  *zklock.Lease
	err    error
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
	done := make(chan acquired, 1)
	go func() { done <- o.connectAndAcquire(ctx, stderr) }()

	var r acquired
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
	if r.err == nil {
		return r.client, r.lease, 0
	}
	return nil, nil, o.acquireFailed(r, errors.Is(context.Cause(ctx), errTimedOut), stderr)
}

// connectAndAcquire opens a session and acquires the lock (or tries to, with
// --try), bounded by ctx. The client is returned even when acquiring fails.
func (o *execOpts) connectAndAcquire(ctx context.Context, stderr io.Writer) acquired {
	opts := []zklock.Option{zklock.WithSessionTimeout(o.session)}
	if o.verbose {
		opts = append(opts, zklock.WithLogger(slog.New(slog.NewTextHandler(stderr, nil))))
	}
	conn := *o.conn
	if o.try {
		// --try never waits for a lock, and not long for ZooKeeper either.
		conn.connectTimeout = min(conn.connectTimeout, tryConnectTimeout)
	}
	client, err := conn.connect(ctx, opts...)
	if err != nil {
		return acquired{err: err}
	}
	acquire, try, err := o.primitive(client)
	var lease *zklock.Lease
	if err == nil {
		actx := zklock.WithOwner(ctx, o.owner)
		if o.try {
			lease, err = try(actx)
		} else {
			lease, err = acquire(actx)
		}
	}
	return acquired{client, lease, err}
}

// tryConnectTimeout caps --connect-timeout for --try: a caller that will not
// wait for the lock should hear of an outage quickly.
const tryConnectTimeout = 3 * time.Second

type acquireFunc func(context.Context) (*zklock.Lease, error)

// primitive is the lock the flags ask for, as its Acquire and TryAcquire.
func (o *execOpts) primitive(c *zklock.Client) (acquire, try acquireFunc, err error) {
	switch {
	case o.read || o.write:
		var opts []zklock.RWOption
		if o.kazoo {
			opts = append(opts, zklock.KazooNames())
		}
		rw, err := c.NewRWMutex(o.paths[0], opts...)
		if err != nil {
			return nil, nil, err
		}
		if o.read {
			return rw.AcquireRead, rw.TryAcquireRead, nil
		}
		return rw.AcquireWrite, rw.TryAcquireWrite, nil
	case o.permits > 0:
		s, err := c.NewSemaphore(o.paths[0], o.permits)
		if err != nil {
			return nil, nil, err
		}
		return s.Acquire, s.TryAcquire, nil
	case o.value != "":
		e, err := c.NewElection(o.paths[0])
		if err != nil {
			return nil, nil, err
		}
		campaign := func(ctx context.Context) (*zklock.Lease, error) {
			ld, err := e.Campaign(ctx, o.value)
			if err != nil {
				return nil, err
			}
			return ld.Lease, nil
		}
		return campaign, nil, nil
	case len(o.paths) > 1:
		ml, err := c.NewMultiLock(o.paths...)
		if err != nil {
			return nil, nil, err
		}
		return ml.Acquire, ml.TryAcquire, nil
	}
	m, err := c.NewMutex(o.paths[0])
	if err != nil {
		return nil, nil, err
	}
	return m.Acquire, m.TryAcquire, nil
}

// acquireFailed reports why r failed and returns the exit code, telling the
// causes apart by the errors they wrap; timedOut: --timeout expired. It
// closes r's client, if any, after the report.
func (o *execOpts) acquireFailed(r acquired, timedOut bool, stderr io.Writer) int {
	if r.client == nil { // no session: an outage, never contention, whatever --timeout says
		return fail(stderr, o.conn.connectExit(r.err), "%s", o.conn.unreachable(r.err))
	}
	defer closeClient(r.client)
	switch {
	case errors.Is(r.err, zklock.ErrUnreachable):
		return fail(stderr, exitUnavailable, "lost contact with ZooKeeper at %s while waiting for %s: %s", o.conn.servers, o.path, cause(r.err))
	case errors.Is(r.err, zk.ErrNoAuth):
		return fail(stderr, exitSoftware, "ZooKeeper refused to let this client queue on %s: not authorised by the path's ACL (%s); give credentials with $%s or --auth-file, or the client certificate of the path's owner", o.path, cause(r.err), envAuth)
	case errors.Is(r.err, zk.ErrInvalidACL):
		return fail(stderr, exitSoftware, "ZooKeeper refused the protected ACL for %s: the session has no identity it knows (a client certificate counts only where the server asks for one, ssl.clientAuth want or need); give credentials with $%s or --auth-file, or use --acl open", o.path, envAuth)
	case errors.Is(r.err, zklock.ErrIncompatible):
		return fail(stderr, exitUsage, "refusing to share %s: %s", o.path, strings.TrimPrefix(cause(r.err), strings.TrimPrefix(zklock.ErrIncompatible.Error(), libPrefix)+": "))
	case errors.Is(r.err, zklock.ErrLocked):
		return fail(stderr, exitLocked, "lock is held: %s is taken or has waiters; drop --try to wait for it, or see who holds it with 'zklock status %s'", o.path, strings.Join(o.paths, " "))
	case timedOut:
		return fail(stderr, exitTimeout, "timed out after %v waiting for %s; see who holds it with 'zklock status %s'", o.timeout, o.path, strings.Join(o.paths, " "))
	default:
		return fail(stderr, exitSoftware, "cannot acquire %s: %s", o.path, cause(r.err))
	}
}

// hold runs the command under the lease and releases the lease after it.
func (o *execOpts) hold(lease *zklock.Lease, sigs <-chan os.Signal, stdout, stderr io.Writer) int {
	token, code := o.confirm(lease, stderr)
	if token == 0 {
		return code
	}
	cmd := o.command(lease, token, stdout, stderr)
	if err := cmd.Start(); err != nil {
		release(lease, o.session)
		return fail(stderr, exitCannotRun, "cannot run %q: %v", o.argv[0], err)
	}
	reap := startReaper(cmd.Process.Pid, o.grace)
	r := o.supervise(cmd, lease, sigs, stderr)
	reap.stop() // the command has exited: what it left is finish's to decide
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
// its environment.
func (o *execOpts) command(lease *zklock.Lease, token int64, stdout, stderr io.Writer) *exec.Cmd {
	cmd := exec.Command(o.argv[0], o.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(os.Environ(), // later entries win
		"ZKLOCK_PATH="+o.path,
		"ZKLOCK_NODE="+lease.Node(),
		"ZKLOCK_TOKEN="+strconv.FormatInt(token, 10),
		"ZKLOCK_TOKENS="+o.partTokens(lease))
	setProcAttr(cmd)
	return cmd
}

// supervised is how a command's run under the lease ended.
type supervised struct {
	waitErr error // what waiting for the command returned
	lost    error // why the lease ended while the command ran; nil if it held
	killed  bool  // the command outlived --grace after SIGTERM and got SIGKILL
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
	)
	if o.revoke {
		asked = lease.RevokeRequested()
	}
	for {
		select {
		case r.waitErr = <-exited:
			return r
		case sig := <-sigs:
			_ = syscall.Kill(-pgid, sig.(syscall.Signal))
		case <-asked:
			asked = nil
			fmt.Fprintf(stderr, "zklock: asked to release the lock on %s; stopping the command: SIGTERM now, SIGKILL after %v\n", o.path, o.grace)
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			killAt = time.After(o.grace)
		case <-leaseUp:
			leaseUp = nil
			r.lost = lease.Err()
			fmt.Fprintf(stderr, "zklock: lost the lock on %s while the command ran: %s; stopping the command: SIGTERM now, SIGKILL after %v\n",
				o.path, lossCause(r.lost), o.grace)
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			killAt = time.After(o.grace)
		case <-killAt:
			killAt = nil
			r.killed = true
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
}

// finish settles the lock once the command has exited: it releases the lease
// and returns the command's exit status, or reports the lease lost (76).
func (o *execOpts) finish(cmd *exec.Cmd, lease *zklock.Lease, r supervised, stderr io.Writer) int {
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
		return exitLost
	}
	release(lease, o.session)
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

// closeClient closes c. Close is bounded by the client's cleanup timeout:
// deletes that cannot get through a partition end with the session.
func closeClient(c *zklock.Client) { c.Close() }

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
	for i, p := range lease.Parts() { // one per path, in o.paths' order
		tok, _ := p.Token(context.Background())
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(o.paths[i] + "=" + strconv.FormatInt(tok, 10))
	}
	return b.String()
}
