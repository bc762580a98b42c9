package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock"
)

var breakCmd = &command{
	name:    "break",
	summary: "delete the lock node of a lock's holder (for operators)",
	usage: `Usage: zklock break --yes [flags] <lock path>

Break is for operators facing a holder that is stuck: it deletes the current
holder's node of the lock at <lock path>, so the next in line gets the lock at
once. The holder's zklock hears of it straight away: 'zklock exec' stops its
command (SIGTERM, then SIGKILL after its --grace) and exits 76. But the old
holder may still be finishing while the new one starts, and a holder that is
not zklock may not notice at all: only fencing tokens (ZKLOCK_TOKEN) keep such
a holder from doing harm. Check with 'zklock status' first; --yes confirms.

Exit status: 0 when the holder's node was deleted or nobody held the lock,
1 if the holder changed meanwhile or ZooKeeper refused the delete, 2 for a
usage error (including a missing --yes), 69 if ZooKeeper could not be reached.
`,
	flags: func(fs *flag.FlagSet) {
		addConnFlags(fs)
		fs.Bool("yes", false, "confirm: delete the holder's node")
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
	h := cs[0]
	who := describe(h)
	if !flagValue[bool](fs, "yes") {
		return fail(stderr, exitUsage, "break deletes the node of the holder of %s (%s), which may still be running; add --yes to confirm", path, who)
	}
	err := client.Conn().Delete(h.Node, -1)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return fail(stderr, exitFailure, "the holder of %s (%s) let go before it could be broken; nothing was deleted, see who holds it now with 'zklock status %s'", path, who, path)
	case err != nil:
		return fail(stderr, exitFailure, "cannot delete %s: %v; check the ACL of the lock nodes", h.Node, err)
	}
	fmt.Fprintf(stdout, "broke the lock on %s: deleted the holder's node %s (%s)\n", path, shortNode(h.Node), who)
	return exitOK
}

func describe(c zklock.Contender) string {
	if !isRecord(c) {
		return fmt.Sprintf("node %s, not zklock's, data %q", shortNode(c.Node), truncate(string(c.Data), 40))
	}
	return fmt.Sprintf("host %s, pid %d, %s, queued %s ago", c.Owner.Host, c.Owner.PID, ownerName(c.Owner), ago(time.Now(), c.Owner.Since))
}
