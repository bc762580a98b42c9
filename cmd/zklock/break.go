package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/internal/lockpath"
)

var breakCmd = &command{
	name:    "break",
	summary: "delete the lock node of a lock's holder (for operators)",
	usage: `Usage: zklock break --yes [flags] <lock path>
       zklock break --ask [flags] <lock path>

Break is for operators facing a holder that is stuck: it deletes the current
holder's node of the lock at <lock path>, so the next in line gets the lock at
once. The holder's zklock hears of it straight away: 'zklock exec' stops its
command (SIGTERM, then SIGKILL after its --grace) and exits 76. But the old
holder may still be finishing while the new one starts, and a holder that is
not zklock may not notice at all: only fencing tokens (ZKLOCK_TOKEN) keep such
a holder from doing harm. Check with 'zklock status' first; --yes confirms.

--ask deletes nothing: it asks the holder to release, as Curator's Revoker
does (it writes __REVOKE__ into the holder's node). A holder that listens
('zklock exec --revocable', a zklock Lease's RevokeRequested, a Curator lock
made revocable) stops and releases; any other holder goes on, and 'zklock
status' shows the request pending.

When several hold together (the readers of a read/write lock, a semaphore's
leases), --yes deletes every holder's node and --ask asks each: breaking one
of them would free nothing.

Exit status: 0 when the holder's node was deleted (or asked) or nobody held the lock,
1 if the holder changed meanwhile or ZooKeeper refused the delete, 2 for a
usage error (including a missing --yes), 69 if ZooKeeper could not be reached.
`,
	flags: func(fs *flag.FlagSet) {
		addConnFlags(fs)
		fs.Bool("yes", false, "confirm: delete the holder's node")
		fs.Bool("ask", false, "ask the holder to release instead of deleting its node")
	},
	run: runBreak,
}

func runBreak(fs *flag.FlagSet, pos []string, stdout, stderr io.Writer) int {
	client, cs, code := contenders("break", fs, pos, stderr)
	if client == nil {
		return code
	}
	defer closeClient(client)
	path := pos[0]
	if len(cs) == 0 {
		fmt.Fprintf(stdout, "nobody holds %s; nothing to break\n", path)
		return exitOK
	}
	holders := holdersOf(cs)
	if flagValue[bool](fs, "ask") {
		code = exitOK
		for _, h := range holders {
			code = max(code, askHolder(client, path, h, describe(h), stdout, stderr))
		}
		return code
	}
	if !flagValue[bool](fs, "yes") {
		return fail(stderr, exitUsage, "break deletes the node of %s, which may still be running; add --yes to confirm", holdersText(path, holders))
	}
	code = exitOK
	for _, h := range holders {
		code = max(code, deleteHolder(client, path, h, len(holders), stdout, stderr))
	}
	return code
}

// holdersOf returns the contenders that hold: the first, or every reader of
// a read/write lock holding together, or a semaphore's first N.
func holdersOf(cs []zklock.Contender) []zklock.Contender {
	var out []zklock.Contender
	for _, c := range cs {
		if c.Holder {
			out = append(out, c)
		}
	}
	return out
}

func holdersText(path string, holders []zklock.Contender) string {
	if len(holders) == 1 {
		return fmt.Sprintf("the holder of %s (%s)", path, describe(holders[0]))
	}
	return fmt.Sprintf("all %d holders of %s (they share it)", len(holders), path)
}

// deleteHolder deletes one holder's node (break --yes); of is how many hold.
func deleteHolder(client *zklock.Client, path string, h zklock.Contender, of int, stdout, stderr io.Writer) int {
	who := describe(h)
	err := client.Conn().Delete(h.Node, -1)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return fail(stderr, exitFailure, "the holder of %s (%s) let go before it could be broken; nothing was deleted, see who holds it now with 'zklock status %s'", path, who, path)
	case errors.Is(err, zk.ErrNoAuth):
		return fail(stderr, exitFailure, "ZooKeeper refused to delete %s: not authorised by the ACL of %s; %s", h.Node, path, authAdvice(client, path))
	case err != nil:
		return fail(stderr, exitFailure, "cannot delete %s: %v; check the ACL of the lock nodes", h.Node, err)
	}
	if of == 1 {
		fmt.Fprintf(stdout, "broke the lock on %s: deleted the holder's node %s (%s)\n", path, lockpath.Short(h.Node), who)
	} else {
		fmt.Fprintf(stdout, "broke the lock on %s: deleted the node %s of one of its %d holders (%s)\n", path, lockpath.Short(h.Node), of, who)
	}
	return exitOK
}

func describe(c zklock.Contender) string {
	if c.RevokeRequested && !isRecord(c) {
		// Curator's Revoker replaced the record: whose node it is, is gone.
		return fmt.Sprintf("node %s, asked to release (data %q, which replaced its owner record)", lockpath.Short(c.Node), string(c.Data))
	}
	if !isRecord(c) {
		return fmt.Sprintf("node %s, not zklock's, data %q", lockpath.Short(c.Node), truncate(string(c.Data), 40))
	}
	who := fmt.Sprintf("host %s, pid %d, %s, queued %s ago", c.Owner.Host, c.Owner.PID, ownerName(c.Owner), ago(time.Now(), c.Owner.Since))
	if c.RevokeRequested {
		who += ", asked to release"
	}
	return who
}

// askHolder asks the holder to release (break --ask).
func askHolder(client *zklock.Client, path string, h zklock.Contender, who string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := client.AskToRelease(ctx, h.Node)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return fail(stderr, exitFailure, "the holder of %s (%s) let go before it could be asked; see who holds it now with 'zklock status %s'", path, who, path)
	case errors.Is(err, zklock.ErrUnreachable):
		return fail(stderr, exitUnavailable, "cannot reach ZooKeeper: %s", cause(err))
	case errors.Is(err, zklock.ErrInvalidArgument):
		return fail(stderr, exitFailure, "cannot ask the holder of %s to release: %s; 'zklock break' without --ask deletes its node", path, cause(err))
	case err != nil:
		return fail(stderr, exitFailure, "cannot ask %s to release: %s; check the ACL of the lock nodes", h.Node, cause(err))
	}
	fmt.Fprintf(stdout, "asked the holder of %s to release: node %s (%s); a holder that does not listen goes on\n", path, lockpath.Short(h.Node), who)
	return exitOK
}
