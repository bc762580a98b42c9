package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/internal/lockpath"
)

var statusCmd = &command{
	name:    "status",
	summary: "show who holds a lock and who waits for it",
	usage: `Usage: zklock status [flags] <lock path>...

Status lists everyone queued on the lock at <lock path>, holder first, in the
order they will get it (several paths: one table each). A read/write lock
shows every reader that holds as HOLDER; a semaphore's path lists its
leases, the first N (its limit) as holders, but not the contenders still
queued on its turnstile (path/locks: give that path to see them).

	POS     place in the queue (0 holds the lock; a read/write lock's
	        readers and a semaphore's first N hold together)
	ROLE    HOLDER or waiting; "(read)" marks a reader, "(asked to
	        release)" a pending 'zklock break --ask'
	NODE    the lock node (--json gives its full path)
	TOKEN   the node's fencing token (ZKLOCK_TOKEN of 'zklock exec')
	HOST    host and PID of the process that queued
	PID
	OWNER   who in that process: the owner name ('zklock exec': the
	        command's name) or the goroutine
	QUEUED  how long ago it joined the queue
	LIMIT   the holder's hold limit (exec --max-hold, WithMaxHold): it
	        ends its hold that long after its grant; "-" for none

Nodes of other libraries sharing the path (Curator, go-zookeeper, kazoo) are
listed with their raw data. --json prints a JSON array with one object per
contender, holder first, with the fields position, holder, reader, node, sequence,
token, host, pid, client, goroutine, owner, since (RFC 3339, null for foreign
nodes), data (the raw node data, null for zklock's own records) and
revoke_requested and max_hold_ms (the hold limit in milliseconds, 0 for
none).

A job's lock path (exec --once-per) also shows the job's last run under the
table. --json keeps to the queue (an array of contenders, [] when nobody
holds or waits, as scripts count on): a job's record is in 'zklock job
--json <lock path>' for one job, and in the rows of --tree --json for every
job under a root.

Several paths print one table each; with --json, one JSON object keyed by
path, each value an array as above.

--tree <root> shows every lock path under <root> (a semaphore's path as one)
in one table: PATH, HOLDER (its owner, or the node's data), HOST, PID, HELD
(how long since the holder queued: at least its hold), QUEUE (nodes waiting
behind the holders), LAST RUN (a job's last outcome and when it ended, or
"-" for a lock path that is no job's). A job's lock path is listed even
while the job is idle and nobody holds it: its record (<lock path>.run)
marks it. --json prints an array of objects with the fields path, holders
(the holding contenders, as above), waiting and job (the job's record as
'zklock job --json' prints it, or null).

Every --json output of status has one form: a JSON array, one element per
line (several paths: an object keyed by path, each value such an array).

--watch shows the view again whenever a listed path's queue changes (or,
with --tree, the tree), until interrupted.

--show-servers first prints the ZooKeeper servers zklock dials: those of
--servers, or, when the ensemble publishes its members' client addresses
(dynamic reconfiguration) and --servers names some of them, every member
the ensemble lists ("following the ensemble's configuration").

Exit status: 0 (also when nobody holds the lock), 1 if ZooKeeper refused the
request, 2 for a usage error, 69 if ZooKeeper could not be reached.
`,
	flags: func(fs *flag.FlagSet) {
		addConnFlags(fs)
		fs.Bool("json", false, "print JSON instead of a table")
		fs.Bool("tree", false, "show every lock path under the given root: holder, how long since it queued, queue length, a job's last run")
		fs.Bool("watch", false, "keep running and show it again at every change, until interrupted")
		fs.Bool("show-servers", false, "first print the servers zklock dials (after a reconfig: the ensemble's members)")
	},
	run: runStatus,
}

// contenders connects and lists the queue of the path in pos[0]. It returns a
// nil client and an exit code after reporting a failure.
func contenders(name string, fs *flag.FlagSet, pos []string, stderr io.Writer) (*zklock.Client, []zklock.Contender, int) {
	cf := connFlagsOf(fs)
	switch {
	case len(pos) == 0:
		return nil, nil, usageError(stderr, name, "missing the lock path")
	case len(pos) > 1:
		return nil, nil, usageError(stderr, name, "too many arguments: %s", strings.Join(pos[1:], " "))
	case cf.check() != "":
		return nil, nil, usageError(stderr, name, "%s", cf.check())
	}
	if msg := badPath(pos[0]); msg != "" {
		return nil, nil, usageError(stderr, name, "%s", msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cf.connectTimeout)
	defer cancel()
	client, err := cf.connectOrRefused(ctx)
	if err != nil {
		return nil, nil, fail(stderr, cf.connectExit(err), "%s", cf.unreachable(err))
	}
	cs, err := client.Contenders(ctx, pos[0])
	if err != nil {
		closeClient(client)
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, fail(stderr, exitUnavailable, "no answer from ZooKeeper at %s within %v; check that it is healthy", cf.servers, cf.connectTimeout)
		}
		return nil, nil, fail(stderr, exitFailure, "cannot list %s: %s", pos[0], cause(err))
	}
	return client, cs, exitOK
}

func runStatus(fs *flag.FlagSet, pos []string, stdout, stderr io.Writer) int {
	cf := connFlagsOf(fs)
	v := statusView{tree: flagValue[bool](fs, "tree"), json: flagValue[bool](fs, "json"), paths: pos}
	switch {
	case len(pos) == 0:
		return usageError(stderr, "status", "missing the lock path")
	case v.tree && len(pos) != 1:
		return usageError(stderr, "status", "--tree takes one root path")
	case cf.check() != "":
		return usageError(stderr, "status", "%s", cf.check())
	}
	for _, p := range pos {
		if v.tree && p == "/" {
			continue // the whole tree: a root, though never a lock path
		}
		if msg := badPath(p); msg != "" {
			return usageError(stderr, "status", "%s", msg)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client, err := cf.connectOrRefused(ctx)
	if err != nil {
		return fail(stderr, cf.connectExit(err), "%s", cf.unreachable(err))
	}
	defer closeClient(client)
	if flagValue[bool](fs, "show-servers") {
		printServers(stdout, cf.servers, client.Servers())
	}
	watch := flagValue[bool](fs, "watch")
	w := newChangeWatch(client, watch)
	for {
		var out strings.Builder
		changed, code := v.render(ctx, client, w, &out, stderr)
		if code != exitOK {
			return code
		}
		if watch && !v.json {
			clearScreen(stdout)
		}
		_, _ = io.WriteString(stdout, out.String())
		if !watch {
			return exitOK
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return exitOK
		}
	}
}

// statusView is what status shows: the queues of some paths, or every lock
// path under a root.
type statusView struct {
	tree  bool
	json  bool
	paths []string
}

// render writes the view to out. It also returns a channel closed at the
// next change of what it listed (w's, with --watch).
func (v statusView) render(ctx context.Context, client *zklock.Client, w *changeWatch, out, stderr io.Writer) (<-chan struct{}, int) {
	paths := v.paths
	changed := w.begin()
	var jobs map[string]zklock.JobState
	if v.tree {
		var runs []string
		var err error
		paths, runs, err = lockPathsUnder(ctx, client, v.paths[0], w)
		if err == nil {
			paths, jobs, err = withJobs(ctx, client, paths, runs)
		}
		if err != nil {
			return nil, listFailed(stderr, v.paths[0], err)
		}
	}
	queues := make([][]zklock.Contender, len(paths))
	for i, p := range paths {
		cs, err := client.Contenders(ctx, p)
		if err != nil {
			return nil, listFailed(stderr, p, err)
		}
		queues[i] = cs
		w.add(p)
	}
	var code int
	switch {
	case v.tree && v.json:
		code = printTreeJSON(out, stderr, paths, queues, jobs)
	case v.tree:
		printTree(out, v.paths[0], paths, queues, jobs)
	case v.json && len(paths) == 1:
		code = printJSON(out, stderr, queues[0])
	case v.json:
		code = printPathsJSON(out, stderr, paths, queues)
	default:
		for i, p := range paths {
			if len(paths) > 1 {
				if i > 0 {
					fmt.Fprintln(out)
				}
				fmt.Fprintf(out, "%s:\n", p)
			}
			printQueue(out, p, queues[i])
			printLastRun(ctx, client, out, p)
			w.addData(p + jobRecordSuffix) // a run's record changes without a child
		}
	}
	return changed, code
}

// listFailed reports a failed listing and returns the exit code.
func listFailed(stderr io.Writer, path string, err error) int {
	if errors.Is(err, zklock.ErrUnreachable) || errors.Is(err, context.DeadlineExceeded) {
		return fail(stderr, exitUnavailable, "no answer from ZooKeeper while listing %s: %s", path, cause(err))
	}
	return fail(stderr, exitFailure, "cannot list %s: %s", path, cause(err))
}

// printQueue prints the queue of one lock path as a table.
func printQueue(out io.Writer, path string, cs []zklock.Contender) {
	now := time.Now()
	if len(cs) == 0 {
		fmt.Fprintf(out, "nobody holds or waits for %s\n", path)
		return
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POS\tROLE\tNODE\tTOKEN\tHOST\tPID\tOWNER\tQUEUED\tLIMIT")
	for i, c := range cs {
		role := "waiting"
		if c.Holder {
			role = "HOLDER"
		}
		if c.Reader {
			role += " (read)"
		}
		if c.RevokeRequested {
			role += " (asked to release)"
		}
		host, pid, owner, queued, limit := "-", "-", "-", "-", "-"
		if c.Owner.MaxHold > 0 {
			limit = c.Owner.MaxHold.String()
		}
		if isRecord(c) {
			host, pid, owner = c.Owner.Host, strconv.Itoa(c.Owner.PID), ownerName(c.Owner)
			queued = ago(now, c.Owner.Since)
		} else {
			owner = "data " + strconv.Quote(truncate(string(c.Data), 24))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", i, role, lockpath.Short(c.Node), c.Token, host, pid, truncate(owner, 32), queued, limit)
	}
	tw.Flush()
}

// isRecord reports whether the node carries zklock's owner record.
func isRecord(c zklock.Contender) bool { return c.Owner.Client != "" }

// ownerName names a holder: its named owner, a reentrant lock's goroutine,
// or else its client.
func ownerName(o zklock.Owner) string {
	switch {
	case o.Name != "":
		return o.Name
	case o.Goroutine != 0:
		return "goroutine " + strconv.FormatInt(o.Goroutine, 10)
	case o.Client != "":
		return "client " + o.Client // no owner named: the process's client
	}
	return "-"
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s" // clocks of different hosts disagree
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// printServers prints the servers the client dials, and whether they are the
// ones given or the ensemble's configuration.
func printServers(out io.Writer, given string, used []string) {
	slices.Sort(used)
	whence := "as given"
	if !sameServers(given, used) {
		whence = "following the ensemble's configuration"
	}
	fmt.Fprintf(out, "servers: %s (%s)\n", strings.Join(used, ","), whence)
}

// sameServers reports whether the --servers list names exactly used.
func sameServers(given string, used []string) bool {
	hosts, _, _ := strings.Cut(given, "/") // a chroot follows the last address
	g := strings.Split(hosts, ",")
	for i := range g {
		g[i] = strings.TrimSpace(g[i])
		if _, _, err := net.SplitHostPort(g[i]); err != nil {
			g[i] = net.JoinHostPort(g[i], "2181") // ZooKeeper's port when none is named
		}
	}
	slices.Sort(g)
	return slices.Equal(g, used)
}
