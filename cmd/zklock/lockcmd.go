package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock"
)

var lockCmd = &command{
	name:    "lock",
	summary: "take a lock and hold it until interrupted (an operator's maintenance session)",
	usage: `Usage: zklock lock [flags] <path>

Lock takes the exclusive lock at <path>, waiting its turn, prints the node
and the fencing token once it holds it:

	holding /locks/deploy: node _c_3f…-lock-0000000007 token 4294967303

and holds it until interrupted (Ctrl-C, SIGTERM), when it releases it and
exits 0, or until the lock is lost, when it says why and exits 76. It is
'zklock exec' without a command, as 'etcdctl lock' without one: for an
operator who keeps the lock while working by hand in another terminal.

Exit status: 0 after releasing on an interrupt, 2 for a usage error, 69 if
ZooKeeper could not be reached, 75 if --timeout expired first, 76 if the
lock was lost, 79 if it was held for --max-hold (or, stopped past it, was
broken by a waiter meanwhile: it says so).
`,
	flags: func(fs *flag.FlagSet) {
		addConnFlags(fs)
		fs.Duration("timeout", 0, "give up (exit 75) if the lock is not acquired within this `duration`; 0 waits for ever")
		fs.Duration("session-timeout", zklock.DefaultSessionTimeout, "ZooKeeper session timeout (a `duration`): how long an unreachable holder keeps the lock")
		fs.Duration("max-hold", 0, "release the lock after this `duration` (exit 79); 0 for no limit")
		fs.String("owner", "operator", "`name` recorded in the lock node for 'zklock status'")
	},
	run: runLock,
}

func runLock(fs *flag.FlagSet, pos []string, stdout, stderr io.Writer) int {
	cf := connFlagsOf(fs)
	timeout, session := flagValue[time.Duration](fs, "timeout"), flagValue[time.Duration](fs, "session-timeout")
	maxHold := flagValue[time.Duration](fs, "max-hold")
	switch {
	case len(pos) != 1:
		return usageError(stderr, "lock", "want one lock path, got %d arguments: %s", len(pos), strings.Join(pos, " "))
	case badPath(pos[0]) != "":
		return usageError(stderr, "lock", "%s", badPath(pos[0]))
	case cf.check() != "":
		return usageError(stderr, "lock", "%s", cf.check())
	case timeout < 0, session <= 0, maxHold < 0:
		return usageError(stderr, "lock", "--timeout and --max-hold must not be negative, --session-timeout must be positive")
	}
	path := pos[0]
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := []zklock.Option{zklock.WithSessionTimeout(session)}
	if maxHold > 0 {
		opts = append(opts, zklock.WithMaxHold(maxHold))
	}
	client, err := cf.connect(ctx, opts...)
	if err != nil {
		return fail(stderr, cf.connectExit(err), "%s", cf.unreachable(err))
	}
	defer closeClient(client)
	lease, code := lockAcquire(ctx, client, cf, path, flagValue[string](fs, "owner"), timeout, stderr)
	if lease == nil {
		return code
	}
	token, _ := lease.Token(ctx)
	fmt.Fprintf(stdout, "holding %s: node %s token %d\n", path, lease.Node(), token)
	select {
	case <-ctx.Done():
		release(lease, session)
		fmt.Fprintf(stdout, "released %s\n", path)
		return exitOK
	case <-lease.Done():
		switch err := lease.Err(); {
		case errors.Is(err, zklock.ErrHoldLimit) && errors.Is(err, zk.ErrNoNode):
			// The limit fired late (the process was stopped) and the node
			// was gone already: a waiter broke it as overdue.
			return fail(stderr, exitHoldLimit, "the lock on %s was broken by a waiter past --max-hold %v while this process was stopped; it is no longer held", path, maxHold)
		case errors.Is(err, zklock.ErrHoldLimit):
			return fail(stderr, exitHoldLimit, "held %s for --max-hold %v; released it", path, maxHold)
		}
		return fail(stderr, exitLost, "lost the lock on %s: %s", path, lossCause(lease.Err()))
	}
}

// lockAcquire waits for the lock within --timeout, or returns nil and the
// exit code after saying why it could not, as exec does.
func lockAcquire(ctx context.Context, c *zklock.Client, cf *connFlags, path, owner string, timeout time.Duration, stderr io.Writer) (*zklock.Lease, int) {
	m, err := c.NewMutex(path)
	if err != nil {
		return nil, usageError(stderr, "lock", "%v", err)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, errTimedOut)
		defer cancel()
	}
	lease, err := m.Acquire(zklock.ContextWithOwner(ctx, owner))
	switch {
	case err == nil:
		return lease, exitOK
	case ctx.Err() != nil && !errors.Is(context.Cause(ctx), errTimedOut) && !errors.Is(err, zklock.ErrUnreachable):
		return nil, fail(stderr, 130, "interrupted while waiting for %s", path)
	}
	o := &execOpts{conn: cf, path: path, paths: []string{path}, timeout: timeout}
	return nil, o.acquireFailed(acquired{client: c, err: err}, errors.Is(context.Cause(ctx), errTimedOut), stderr)
}
