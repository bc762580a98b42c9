package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/internal/lockpath"
)

var leaderCmd = &command{
	name:    "leader",
	summary: "show who leads an election (or holds a lock), and follow changes",
	usage: `Usage: zklock leader [flags] <path>

Leader prints who leads the election at <path>: the holder of its lock,
whether it campaigned with zklock (Election, RunSingleton, 'zklock exec'),
Curator's LeaderSelector or LeaderLatch, or another client of the same
recipe. The line
gives the leader's published value (a Curator participant's id), host, pid,
owner, fencing token and node:

	leader of /jobs/nightly: value "10.0.0.7:8080" host web-1 pid 4242 owner report token 4294967301 node lock-0000000003

--watch keeps running and prints a line at every change (another leader,
a new value, or "nobody leads"), until interrupted; it costs one watch.
--json prints each leader as a JSON object with the fields leader (false
when nobody leads), node, value, host, pid, owner, token and data (the raw
node data, for other libraries' nodes).

Exit status: 0 when someone leads (always, with --watch, once interrupted),
1 when nobody leads, 2 for a usage error or a path that is a read/write lock
(its readers lead nothing), 69 if ZooKeeper could not be reached.
`,
	flags: func(fs *flag.FlagSet) {
		addConnFlags(fs)
		fs.Bool("watch", false, "follow changes until interrupted")
		fs.Bool("json", false, "print JSON objects instead of lines")
	},
	run: runLeader,
}

func runLeader(fs *flag.FlagSet, pos []string, stdout, stderr io.Writer) int {
	cf := connFlagsOf(fs)
	switch {
	case len(pos) == 0:
		return usageError(stderr, "leader", "missing the election path")
	case len(pos) > 1:
		return usageError(stderr, "leader", "too many arguments: %s", strings.Join(pos[1:], " "))
	case cf.check() != "":
		return usageError(stderr, "leader", "%s", cf.check())
	}
	path := pos[0]
	if msg := badPath(path); msg != "" {
		return usageError(stderr, "leader", "%s", msg)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client, err := cf.connect(ctx)
	if err != nil {
		return fail(stderr, cf.connectExit(err), "%s", cf.unreachable(err))
	}
	defer closeClient(client)
	e, err := client.NewElection(path)
	if err != nil {
		return usageError(stderr, "leader", "%v", err)
	}
	asJSON := flagValue[bool](fs, "json")
	if flagValue[bool](fs, "watch") {
		for ld := range e.Observe(ctx) {
			if sharedHolder(ld.Node) {
				ld = zklock.Leader{} // a read/write lock's holder leads nothing
			}
			printLeader(stdout, path, ld, asJSON)
		}
		return exitOK
	}
	ld, err := e.Leader(ctx)
	if err == nil && sharedHolder(ld.Node) {
		return fail(stderr, exitUsage, "%s is a read/write lock, not an election: node %s holds as one of its readers or writer, and no one leads; 'zklock status %s' shows its holders", path, lockpath.Short(ld.Node), path)
	}
	switch {
	case errors.Is(err, zklock.ErrNoLeader):
		printLeader(stdout, path, zklock.Leader{}, asJSON)
		return exitFailure
	case errors.Is(err, zklock.ErrUnreachable):
		return fail(stderr, exitUnavailable, "no answer from ZooKeeper at %s: %s", cf.servers, cause(err))
	case err != nil:
		return fail(stderr, exitFailure, "cannot read the leader of %s: %s", path, cause(err))
	}
	printLeader(stdout, path, ld, asJSON)
	return exitOK
}

// leaderJSON is one object of 'leader --json'; every field is always there.
type leaderJSON struct {
	Leader bool    `json:"leader"`
	Node   string  `json:"node"`
	Value  string  `json:"value"`
	Host   string  `json:"host"`
	PID    int     `json:"pid"`
	Owner  string  `json:"owner"`
	Token  int64   `json:"token"`
	Data   *string `json:"data"`
}

func printLeader(w io.Writer, path string, ld zklock.Leader, asJSON bool) {
	if asJSON {
		j := leaderJSON{Leader: ld.Node != "", Node: ld.Node, Value: ld.Value, Host: ld.Owner.Host, PID: ld.Owner.PID, Owner: ld.Owner.Name, Token: ld.Token}
		if ld.Node != "" && ld.Owner.Client == "" {
			data := string(ld.Data)
			j.Data = &data
		}
		line, _ := json.Marshal(j)
		fmt.Fprintf(w, "%s\n", line)
		return
	}
	if ld.Node == "" {
		fmt.Fprintf(w, "nobody leads %s\n", path)
		return
	}
	who := "not zklock's"
	if ld.Owner.Client != "" {
		who = fmt.Sprintf("host %s pid %d owner %s since %s", ld.Owner.Host, ld.Owner.PID, ownerName(ld.Owner), ld.Owner.Since.Format(time.RFC3339))
	}
	fmt.Fprintf(w, "leader of %s: value %q %s token %d node %s\n", path, ld.Value, who, ld.Token, lockpath.Short(ld.Node))
}

// sharedHolder reports whether node is a read/write lock's (a reader, or
// Curator's writer): such a path is not an election, and its first node
// does not lead anything.
func sharedHolder(node string) bool {
	n, ok := lockpath.Parse(path.Base(node))
	return ok && (n.Shared || n.Marker == "__WRIT__")
}
