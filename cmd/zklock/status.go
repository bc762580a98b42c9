package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zklock/zklock"
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

Nodes of other libraries sharing the path (Curator, go-zookeeper, kazoo) are
listed with their raw data. --json prints a JSON array with one object per
contender, holder first, with the fields position, holder, reader, node, sequence,
token, host, pid, client, goroutine, owner, since (RFC 3339, null for foreign
nodes), data (the raw node data, null for zklock's own records) and
revoke_requested.

Exit status: 0 (also when nobody holds the lock), 1 if ZooKeeper refused the
request, 2 for a usage error, 69 if ZooKeeper could not be reached.
`,
	flags: func(fs *flag.FlagSet) {
		addConnFlags(fs)
		fs.Bool("json", false, "print JSON instead of a table")
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
	client, err := cf.connect(ctx)
	if err != nil {
		return nil, nil, fail(stderr, exitUnavailable, "%s", cf.unreachable(err))
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
	if len(pos) <= 1 {
		return statusOf(fs, pos, stdout, stderr)
	}
	if flagValue[bool](fs, "json") {
		return usageError(stderr, "status", "--json takes one lock path")
	}
	for _, p := range pos {
		if msg := badPath(p); msg != "" {
			return usageError(stderr, "status", "%s", msg)
		}
	}
	for i, p := range pos {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "%s:\n", p)
		if code := statusOf(fs, []string{p}, stdout, stderr); code != exitOK {
			return code
		}
	}
	return exitOK
}

// statusOf prints the queue of one lock path.
func statusOf(fs *flag.FlagSet, pos []string, stdout, stderr io.Writer) int {
	client, cs, code := contenders("status", fs, pos, stderr)
	if client == nil {
		return code
	}
	closeClient(client)
	now := time.Now()
	if flagValue[bool](fs, "json") {
		return printJSON(stdout, stderr, cs)
	}
	if len(cs) == 0 {
		fmt.Fprintf(stdout, "nobody holds or waits for %s\n", pos[0])
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POS\tROLE\tNODE\tTOKEN\tHOST\tPID\tOWNER\tQUEUED")
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
		host, pid, owner, queued := "-", "-", "-", "-"
		if isRecord(c) {
			host, pid, owner = c.Owner.Host, strconv.Itoa(c.Owner.PID), ownerName(c.Owner)
			queued = ago(now, c.Owner.Since)
		} else {
			owner = "data " + strconv.Quote(truncate(string(c.Data), 24))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", i, role, shortNode(c.Node), c.Token, host, pid, truncate(owner, 32), queued)
	}
	tw.Flush()
	return exitOK
}

// contenderJSON is one element of 'status --json'. Every field is always
// present, so scripts can rely on the shape.
type contenderJSON struct {
	Position  int        `json:"position"`
	Holder    bool       `json:"holder"`
	Reader    bool       `json:"reader"`
	Node      string     `json:"node"`
	Sequence  int64      `json:"sequence"`
	Token     int64      `json:"token"`
	Host      string     `json:"host"`
	PID       int        `json:"pid"`
	Client    string     `json:"client"`
	Goroutine int64      `json:"goroutine"`
	Owner     string     `json:"owner"`
	Since     *time.Time `json:"since"`
	Data      *string    `json:"data"`
	// RevokeRequested: someone asked the holder to release (break --ask).
	RevokeRequested bool `json:"revoke_requested"`
}

// printJSON writes one contender per line, so that line tools work too.
func printJSON(stdout, stderr io.Writer, cs []zklock.Contender) int {
	var b strings.Builder
	b.WriteString("[")
	for i, c := range cs {
		j := contenderJSON{
			Position: i, Holder: c.Holder, Reader: c.Reader, Node: c.Node, Sequence: c.Sequence, Token: c.Token,
			Host: c.Owner.Host, PID: c.Owner.PID, Client: c.Owner.Client, Goroutine: c.Owner.Goroutine, Owner: c.Owner.Name,
			RevokeRequested: c.RevokeRequested,
		}
		if isRecord(c) {
			since := c.Owner.Since
			j.Since = &since
		} else {
			data := string(c.Data)
			j.Data = &data
		}
		line, err := json.Marshal(j)
		if err != nil {
			return fail(stderr, exitFailure, "encoding JSON: %v", err)
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n")
		b.Write(line)
	}
	if len(cs) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	_, _ = io.WriteString(stdout, b.String())
	return exitOK
}

// isRecord reports whether the node carries zklock's owner record.
func isRecord(c zklock.Contender) bool { return c.Owner.Client != "" }

func ownerName(o zklock.Owner) string {
	switch {
	case o.Name != "":
		return o.Name
	case o.Goroutine != 0:
		return "goroutine " + strconv.FormatInt(o.Goroutine, 10)
	}
	return "-"
}

// shortNode drops the lock path and, for the protected names of zklock,
// Curator and go-zookeeper ("_c_<guid>-lock-<seq>"), the GUID.
func shortNode(node string) string {
	name := node[strings.LastIndexByte(node, '/')+1:]
	if !strings.HasPrefix(name, "_c_") {
		return name
	}
	for _, marker := range []string{"-lock-", "-lease-", "-__READ__", "-__WRIT__"} {
		if i := strings.LastIndex(name, marker); i > 0 {
			return name[i+1:]
		}
	}
	return name
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
