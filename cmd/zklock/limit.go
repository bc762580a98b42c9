package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock/internal/lockpath"
)

var limitCmd = &command{
	name:    "limit",
	summary: "show or reset the limit stored with a semaphore's path",
	usage: `Usage: zklock limit [--reset] [flags] <semaphore path>

A zklock semaphore stores its N (its limit) as the data of its path, and a
client asking for another N is refused ("semaphore limit differs"). Limit
prints the stored N and how many leases are held or waiting:

	/locks/encoders: limit 4, 3 leases

--reset clears the stored limit, so that the next semaphore to use the path
stores its own N. It refuses while any lease is held or waiting: clients
with two limits on one path would let more holders in than either allows.

Exit status: 0 on success, 1 if there is no limit stored or leases hold
(--reset), 2 for a usage error, 69 if ZooKeeper could not be reached.
`,
	flags: func(fs *flag.FlagSet) {
		addConnFlags(fs)
		fs.Bool("reset", false, "clear the stored limit (only while no lease is held or waiting)")
	},
	run: runLimit,
}

func runLimit(fs *flag.FlagSet, pos []string, stdout, stderr io.Writer) int {
	cf := connFlagsOf(fs)
	switch {
	case len(pos) != 1:
		return usageError(stderr, "limit", "want one semaphore path, got %d arguments", len(pos))
	case cf.check() != "":
		return usageError(stderr, "limit", "%s", cf.check())
	}
	path := pos[0]
	if msg := badPath(path); msg != "" {
		return usageError(stderr, "limit", "%s", msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cf.connectTimeout+10*time.Second)
	defer cancel()
	client, err := cf.connect(ctx)
	if err != nil {
		return fail(stderr, cf.connectExit(err), "%s", cf.unreachable(err))
	}
	defer closeClient(client)
	conn := client.Conn()
	data, stat, err := conn.Get(path)
	if err != nil {
		return zkFailed(stderr, path, err)
	}
	leasesPath := path + "/" + lockpath.Leases
	leases, _, err := conn.Children(leasesPath)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return zkFailed(stderr, leasesPath, err)
	}
	limit := strings.TrimSpace(string(data))
	if limit == "" {
		fmt.Fprintf(stdout, "%s: no limit stored, %d leases\n", path, len(leases))
		return exitFailure
	}
	if !flagValue[bool](fs, "reset") {
		fmt.Fprintf(stdout, "%s: limit %s, %d leases\n", path, limit, len(leases))
		return exitOK
	}
	if len(leases) > 0 {
		return fail(stderr, exitFailure, "%s has %d leases held or waiting; reset its limit when none are ('zklock status %s' shows them)", path, len(leases), path)
	}
	// The version makes the reset lose to a semaphore that stored its limit
	// meanwhile.
	if _, err := conn.Set(path, []byte{}, stat.Version); err != nil {
		return zkFailed(stderr, path, err)
	}
	fmt.Fprintf(stdout, "%s: limit %s cleared; the next semaphore on the path stores its own\n", path, limit)
	return exitOK
}

// zkFailed reports a refused or failed request to ZooKeeper.
func zkFailed(stderr io.Writer, path string, err error) int {
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return fail(stderr, exitFailure, "%s does not exist", path)
	case errors.Is(err, zk.ErrBadVersion):
		return fail(stderr, exitFailure, "%s changed meanwhile; look again", path)
	case errors.Is(err, zk.ErrConnectionClosed):
		return fail(stderr, exitUnavailable, "lost contact with ZooKeeper while reading %s", path)
	}
	return fail(stderr, exitFailure, "%s: %v", path, err)
}
