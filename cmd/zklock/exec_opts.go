package main

// exec's options: its flags and arguments, read and checked before
// anything talks to ZooKeeper.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zklock/zklock"
)

// execOpts is one run of exec: its flags and arguments, and what it learns
// as it runs.
type execOpts struct {
	grants  *grantClock // the grants of the lease's parts, and the hold limit's kill (exec_acquire.go)
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
	take       int              // --permits: how many of the semaphore's permits
	revoke     bool             // --revocable
	value      string           // --value: campaign in an election
	maxHold    time.Duration    // --max-hold: the hold limit, 0 for none
	granted    time.Time        // when the lock was granted, as exec can tell: --max-hold's timers run from it
	oncePer    time.Duration    // --once-per: the job's period, 0 for none (a calendar's nominal length)
	cal        *zklock.Calendar // --once-per day, week or month, with --at and --tz
	quiet      bool             // --quiet: nothing printed when not run
	notRunExit int              // --not-run-exit: the exit code when not run
	retry      bool             // --retry-failed
	signalled  os.Signal        // the last signal passed on to the command, for the job's record
	jobRun     *zklock.JobRun   // the run --once-per started, ended by finish
	stderr     io.Writer        // for warnings after the command (a job's end not recorded)
	httpAt     string           // --http: serve leadership for probes here
	probe      *execProbe       // its server: exec_probe.go

	// grantedSession is the session timeout the server granted: the group's
	// deadlines keep clear of the session's expiry (groupDeadline).
	grantedSession time.Duration
	// sessionTimeout is the client's SessionTimeout: the smallest grant of
	// the session so far, which a reconnection may lower.
	sessionTimeout func() time.Duration
}

// execOptsOf reads exec's flags and arguments. It returns nil and the exit
// code after reporting a usage error or a command that cannot run.
func execOptsOf(fset *flag.FlagSet, pos []string, stderr io.Writer) (*execOpts, int) {
	o := execFlagsOf(fset)
	if msg := o.calendarOf(fset); msg != "" {
		return nil, usageError(stderr, "exec", "%s", msg)
	}
	if msg := o.checkJobFlags(given(fset)); msg != "" {
		return nil, usageError(stderr, "exec", "%s", msg)
	}
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

// execFlagsOf reads exec's flags as given, before any is checked (--once-per
// and its calendar: calendarOf).
func execFlagsOf(fset *flag.FlagSet) *execOpts {
	return &execOpts{
		conn:       connFlagsOf(fset),
		timeout:    flagValue[time.Duration](fset, "timeout"),
		try:        flagValue[bool](fset, "try"),
		session:    flagValue[time.Duration](fset, "session-timeout"),
		grace:      flagValue[time.Duration](fset, "grace"),
		owner:      flagValue[string](fset, "owner"),
		verbose:    flagValue[bool](fset, "verbose"),
		read:       flagValue[bool](fset, "read"),
		write:      flagValue[bool](fset, "write"),
		permits:    flagValue[int](fset, "semaphore"),
		permitsSet: given(fset)["semaphore"],
		take:       flagValue[int](fset, "permits"),
		kazoo:      flagValue[bool](fset, "kazoo"),
		revoke:     flagValue[bool](fset, "revocable"),
		value:      flagValue[string](fset, "value"),
		maxHold:    flagValue[time.Duration](fset, "max-hold"),
		quiet:      flagValue[bool](fset, "quiet"),
		notRunExit: flagValue[int](fset, "not-run-exit"),
		retry:      flagValue[bool](fset, "retry-failed"),
		httpAt:     flagValue[string](fset, "http"),
	}
}

// given is the set of flags given on the command line (a default is not
// given, even when its value is the same).
func given(fset *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// jobFlags are the flags that only a job takes: they need --once-per. In
// the order they are named in a usage error.
var jobFlags = []string{"not-run-exit", "quiet", "retry-failed"}

// checkJobFlags checks --once-per, when given (set: the flags given), and
// that the flags of a job come with it; it returns a usage message or "".
func (o *execOpts) checkJobFlags(set map[string]bool) string {
	if set["once-per"] {
		if o.oncePer < time.Millisecond {
			return "--once-per must be at least 1ms (leave it out to run the command every time)"
		}
		return ""
	}
	var alone []string
	for _, name := range jobFlags {
		if set[name] {
			alone = append(alone, "--"+name)
		}
	}
	if len(alone) > 0 {
		return strings.Join(alone, ", ") + ": use with --once-per"
	}
	return ""
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
	case o.httpAt != "" && o.value == "":
		return "--http serves an election's leadership: use it with --value"
	case kinds > 0 && len(o.paths) > 1:
		return "--read, --write and --semaphore take one lock path; paths added with --and are exclusive locks"
	case o.oncePer != 0 && (kinds > 0 || len(o.paths) > 1 || o.value != ""):
		return "--once-per runs a job under one exclusive lock: it excludes --read, --write, --semaphore, --and and --value"
	case o.oncePer < 0, o.oncePer != 0 && o.oncePer < time.Millisecond:
		return "--once-per must be at least 1ms"
	case o.notRunExit < 0 || o.notRunExit > 255:
		return "--not-run-exit must be an exit code from 0 to 255"
	case o.checkPermits() != "":
		return o.checkPermits()
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
	case o.maxHold < 0:
		return "--max-hold must not be negative (0, or leave it out, for no limit)"
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
