package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// TestStatusQueue: one holder and two waiters, as a table and as JSON.
func TestStatusQueue(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	holder := start(t, "exec", path, "--", "sleep", "30")
	waitQueue(t, c, path, 1)
	w1 := start(t, "exec", "--owner", "first waiter", path, "--", "true")
	waitQueue(t, c, path, 2)
	w2 := start(t, "exec", path, "--", "true")
	waitQueue(t, c, path, 3)
	pids := []int{holder.cmd.Process.Pid, w1.cmd.Process.Pid, w2.cmd.Process.Pid}

	code, out, stderr := runZK(t, 20*time.Second, "status", path)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	require.Equal(t, []string{"POS", "ROLE", "NODE", "TOKEN", "HOST", "PID", "OWNER", "QUEUED", "LIMIT"}, strings.Fields(lines[0]))
	host, _ := os.Hostname()
	for i, l := range lines[1:] {
		f := strings.Fields(l)
		require.Equal(t, strconv.Itoa(i), f[0], l)
		role := "waiting"
		if i == 0 {
			role = "HOLDER"
		}
		require.Equal(t, role, f[1], l)
		require.Equal(t, "lock-"+strings.Repeat("0", 9)+strconv.Itoa(i), f[2], l)
		require.Equal(t, host, f[4], l)
		require.Equal(t, strconv.Itoa(pids[i]), f[5], l)
	}
	require.Contains(t, lines[1], "sleep")
	require.Contains(t, lines[2], "first waiter")

	code, out, stderr = runZK(t, 20*time.Second, "status", "--json", path)
	require.Equal(t, 0, code, stderr)
	var got []contenderJSON
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Len(t, got, 3)
	for i, g := range got {
		require.Equal(t, i, g.Position)
		require.Equal(t, i == 0, g.Holder)
		require.Equal(t, pids[i], g.PID)
		require.Equal(t, host, g.Host)
		require.True(t, strings.HasPrefix(g.Node, path+"/_c_"), g.Node)
		require.Equal(t, int64(i), g.Sequence)
		require.NotEmpty(t, g.Client)
		require.NotNil(t, g.Since)
		require.Nil(t, g.Data)
		if i > 0 {
			require.Greater(t, g.Token, got[i-1].Token)
		}
	}
	require.Equal(t, []string{"sleep", "first waiter", "true"}, []string{got[0].Owner, got[1].Owner, got[2].Owner})
	// The raw JSON has every field, even empty ones.
	line := strings.Split(out, "\n")[1]
	for _, k := range []string{"position", "holder", "node", "sequence", "token", "host", "pid", "client", "goroutine", "owner", "since", "data"} {
		require.Contains(t, line, `"`+k+`":`)
	}

	// The holder's sleep dies of the forwarded SIGTERM; the waiters then run.
	require.NoError(t, holder.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 128+int(syscall.SIGTERM), holder.wait(t, 10*time.Second))
	require.Equal(t, 0, w1.wait(t, 10*time.Second))
	require.Equal(t, 0, w2.wait(t, 10*time.Second))
}

// TestStatusForeignNodes: nodes of other libraries are listed with their raw
// data; an empty or missing path has nobody.
func TestStatusForeignNodes(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	code, out, _ := runZK(t, 20*time.Second, "status", path)
	require.Equal(t, 0, code)
	require.Equal(t, "nobody holds or waits for "+path+"\n", out)
	code, out, _ = runZK(t, 20*time.Second, "status", "--json", path)
	require.Equal(t, 0, code)
	require.Equal(t, "[]\n", out)

	conn := c.Conn()
	parts := strings.Split(path, "/")
	for i := 1; i < len(parts); i++ {
		_, err := conn.Create(strings.Join(parts[:i+1], "/"), nil, 0, zk.WorldACL(zk.PermAll))
		if err != zk.ErrNodeExists {
			require.NoError(t, err)
		}
	}
	// Curator writes the client's IP address; kazoo its identifier.
	_, err := conn.Create(path+"/_c_0123456789abcdef0123456789abcdef-lock-", []byte("10.0.0.7"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, err = conn.Create(path+"/kazoo-id__lock__", []byte("worker-7"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	code, out, stderr := runZK(t, 20*time.Second, "status", path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `data "10.0.0.7"`)
	require.Contains(t, out, "kazoo-id__lock__0000000001")
	require.Contains(t, out, `data "worker-7"`)

	code, out, stderr = runZK(t, 20*time.Second, "status", "--json", path)
	require.Equal(t, 0, code, stderr)
	var got []contenderJSON
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Len(t, got, 2)
	require.True(t, got[0].Holder)
	require.NotNil(t, got[0].Data)
	require.Equal(t, "10.0.0.7", *got[0].Data)
	require.Equal(t, "worker-7", *got[1].Data)
	require.Nil(t, got[0].Since)

	// break deletes a foreign holder too, but only with --yes.
	code, _, stderr = runZK(t, 20*time.Second, "break", path)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "add --yes to confirm")
	require.Len(t, contendersOf(t, c, path), 2)
	code, out, stderr = runZK(t, 20*time.Second, "break", "--yes", path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "deleted the holder's node lock-0000000000")
	cs := contendersOf(t, c, path)
	require.Len(t, cs, 1)
	require.True(t, strings.HasSuffix(cs[0].Node, "kazoo-id__lock__0000000001"))
}

func TestBreakNobody(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	code, out, stderr := runZK(t, 20*time.Second, "break", "--yes", path)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "nobody holds "+path+"; nothing to break\n", out)
}

// TestServer starts 'zklock server', uses it, and stops it with SIGINT.
func TestServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	p := start(t, "server", "--port", strconv.Itoa(port))
	var addr string
	eventually(t, "the server's address", func() bool {
		f, err := os.Open(p.stdout)
		require.NoError(t, err)
		defer f.Close()
		first, _ := bufio.NewReader(f).ReadString('\n')
		addr = strings.TrimSpace(strings.TrimPrefix(first, envServers+"="))
		select {
		case <-p.done:
			t.Fatalf("zklock server exited %d: %s", p.code, p.errText())
		default:
		}
		return strings.HasSuffix(first, "\n")
	})
	require.Equal(t, fmt.Sprintf("127.0.0.1:%d", port), addr, "--port is honoured")

	cmd := exec.Command(bin, "exec", "--servers", addr, "/try/it", "--", "true")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = zktest.FourLetter(ctx, addr, "ruok")
	require.NoError(t, err)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 0, p.wait(t, 20*time.Second), p.errText())
	require.Contains(t, p.outText(), "stopping ZooKeeper")
	_, err = zktest.FourLetter(ctx, addr, "ruok")
	require.Error(t, err, "the server is gone")
}

// TestStatusReadersSemaphoreAndSeveralPaths: readers that hold are all
// holders, marked (read); a semaphore's path lists its leases with the
// first N holding; several paths give one table each.
func TestStatusReadersSemaphoreAndSeveralPaths(t *testing.T) {
	t.Parallel()
	rwPath, semPath := lockPath(t), lockPath(t)
	c := connect(t)
	rw, err := c.NewRWMutex(rwPath)
	require.NoError(t, err)
	for range 2 {
		_, err := rw.AcquireRead(context.Background())
		require.NoError(t, err)
	}
	s, err := c.NewSemaphore(semPath, 2)
	require.NoError(t, err)
	for range 2 {
		_, err := s.Acquire(context.Background())
		require.NoError(t, err)
	}
	code, out, errOut := runZK(t, 20*time.Second, "status", rwPath, semPath)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 2, strings.Count(out, "HOLDER (read)"), out)
	require.Contains(t, out, semPath+":\n")
	require.Equal(t, 4, strings.Count(out, "HOLDER"), out)

	code, out, errOut = runZK(t, 20*time.Second, "status", "--json", rwPath, semPath)
	require.Equal(t, exitOK, code, errOut)
	var byPath map[string][]contenderJSON
	require.NoError(t, json.Unmarshal([]byte(out), &byPath), out)
	require.Len(t, byPath[rwPath], 2)
	require.Len(t, byPath[semPath], 2)
}

// status --tree: every lock path under a root in one table (holder, queue
// length), and as JSON; --watch shows it again when a queue changes.
func TestStatusTreeAndWatch(t *testing.T) {
	t.Parallel()
	root := lockPath(t)
	a, b, sem := root+"/jobs/a", root+"/jobs/b", root+"/pool"
	c := connect(t)
	ma, err := c.NewMutex(a)
	require.NoError(t, err)
	_, err = ma.Acquire(context.Background())
	require.NoError(t, err)
	go func() { _, _ = mustMutexCLI(t, c, a).Acquire(context.Background()) }()
	waitQueue(t, c, a, 2)
	s, err := c.NewSemaphore(sem, 2)
	require.NoError(t, err)
	_, err = s.Acquire(context.Background())
	require.NoError(t, err)

	code, out, errOut := runZK(t, 20*time.Second, "status", "--tree", root)
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Equal(t, []string{"PATH", "HOLDER", "HOST", "PID", "HELD", "QUEUE", "LAST", "RUN"}, strings.Fields(lines[0]))
	require.True(t, strings.HasPrefix(lines[1], a+" "), out)
	require.Equal(t, []string{"1", "-"}, strings.Fields(lines[1])[len(strings.Fields(lines[1]))-2:], "one waiting on a, no job")
	require.True(t, strings.HasPrefix(lines[2], sem+" "), out)
	require.NotContains(t, out, b)

	code, out, errOut = runZK(t, 20*time.Second, "status", "--tree", "--json", root)
	require.Equal(t, exitOK, code, errOut)
	var rows []treeRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
	require.Len(t, rows, 2)
	require.Equal(t, a, rows[0].Path)
	require.Len(t, rows[0].Holders, 1)
	require.Equal(t, 1, rows[0].Waiting)
	require.Equal(t, os.Getpid(), rows[1].Holders[0].PID)
	require.Nil(t, rows[0].Job, "no job's lock path")

	w := start(t, "status", "--watch", "--tree", root)
	eventually(t, "the first view", func() bool { return strings.Count(w.outText(), a+" ") == 1 })
	mb, err := c.NewMutex(b)
	require.NoError(t, err)
	_, err = mb.Acquire(context.Background())
	require.NoError(t, err)
	eventually(t, "the view after b was taken", func() bool { return strings.Contains(w.outText(), b+" ") })
}

func mustMutexCLI(t *testing.T, c *zklock.Client, p string) *zklock.Mutex {
	m, err := c.NewMutex(p)
	require.NoError(t, err)
	return m
}

// A taken --port is reported plainly, at once, before any ZooKeeper starts.
func TestServerTakenPort(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	code, out, stderr := runZK(t, 10*time.Second, "server", "--port", strconv.Itoa(port))
	require.Equal(t, exitFailure, code)
	require.Empty(t, out)
	require.Contains(t, stderr, fmt.Sprintf("zklock: port %d on 127.0.0.1 is taken", port))
	require.NotContains(t, stderr, "Exception")
}

// zklock limit shows a semaphore's stored limit, refuses a reset while
// leases hold, and resets it once none do: the next semaphore stores its own.
func TestLimitShowAndReset(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s, err := c.NewSemaphore(path, 2)
	require.NoError(t, err)
	l, err := s.Acquire(context.Background())
	require.NoError(t, err)
	code, out, errOut := runZK(t, 20*time.Second, "limit", path)
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, path+": limit 2, 1 leases\n", out)
	code, _, errOut = runZK(t, 20*time.Second, "limit", "--reset", path)
	require.Equal(t, exitFailure, code)
	require.Contains(t, errOut, "1 leases held or waiting")
	require.NoError(t, l.Release(context.Background()))

	code, out, errOut = runZK(t, 20*time.Second, "limit", "--reset", path)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "limit 2 cleared")
	s3, err := c.NewSemaphore(path, 3)
	require.NoError(t, err)
	l, err = s3.Acquire(context.Background())
	require.NoError(t, err, "a new limit is stored after the reset")
	require.NoError(t, l.Release(context.Background()))
	code, out, _ = runZK(t, 20*time.Second, "limit", path)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "limit 3")
}

// status --tree lists the jobs under a root with their last run, idle ones
// too (their lock path gone, found by the record beside it): LAST RUN in
// the table, job (as 'zklock job --json' prints it) in --json. A single
// path's --json stays the array of contenders.
func TestStatusTreeShowsJobs(t *testing.T) {
	t.Parallel()
	root := lockPath(t)
	ok, failed, held := root+"/jobs/ok", root+"/jobs/failed", root+"/locks/held"
	code, _, errOut := runZK(t, 20*time.Second, "exec", "--once-per", "1h", ok, "--", "true")
	require.Equal(t, 0, code, errOut)
	code, _, errOut = runZK(t, 20*time.Second, "exec", "--once-per", "1h", failed, "--", "sh", "-c", "exit 3")
	require.Equal(t, 3, code, errOut)
	c := connect(t)
	_, err := mustMutexCLI(t, c, held).Acquire(context.Background())
	require.NoError(t, err)

	code, out, errOut := runZK(t, 20*time.Second, "status", "--tree", "--json", root)
	require.Equal(t, exitOK, code, errOut)
	var rows []treeRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
	require.Len(t, rows, 3, out)
	require.Equal(t, []string{failed, ok, held}, []string{rows[0].Path, rows[1].Path, rows[2].Path})
	require.NotNil(t, rows[0].Job)
	require.Equal(t, failed, rows[0].Job.Path)
	require.Equal(t, int64(3600000), rows[0].Job.PeriodMs)
	require.Equal(t, "failed", rows[0].Job.Last.Outcome)
	require.Equal(t, "error", rows[0].Job.Last.Cause)
	require.Equal(t, "exit status 3", rows[0].Job.Last.Error)
	require.Nil(t, rows[0].Job.LastSuccess)
	require.Empty(t, rows[0].Holders)
	require.NotNil(t, rows[1].Job)
	require.Equal(t, "succeeded", rows[1].Job.Last.Outcome)
	require.NotNil(t, rows[1].Job.Last.End)
	require.Equal(t, rows[1].Job.Last.EndMs, rows[1].Job.LastSuccess.EndMs)
	require.Equal(t, jobState(t, ok), *rows[1].Job, "the record as 'zklock job --json' prints it")
	require.Nil(t, rows[2].Job)
	require.Len(t, rows[2].Holders, 1)

	code, out, errOut = runZK(t, 20*time.Second, "status", "--tree", root)
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	require.Regexp(t, `^`+regexp.QuoteMeta(failed)+` .* failed \(error\) \d{4}-\d\d-\d\dT[\d:.]+Z$`, lines[1])
	require.Regexp(t, `^`+regexp.QuoteMeta(ok)+` .* succeeded \d{4}-\d\d-\d\dT[\d:.]+Z$`, lines[2])
	require.Regexp(t, `^`+regexp.QuoteMeta(held)+` .* 0 +-$`, lines[3])

	code, out, errOut = runZK(t, 20*time.Second, "status", "--json", ok)
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "[]\n", out, "a single path's --json keeps its form")
}

// status --tree --watch shows a job's record again when only the record
// changes: a run's start is written after its lock's grant, which the view
// may have shown already.
func TestStatusTreeWatchSeesJobRecord(t *testing.T) {
	t.Parallel()
	root := lockPath(t)
	job := root + "/jobs/report"
	code, _, errOut := runZK(t, 20*time.Second, "exec", "--once-per", "1h", job, "--", "true")
	require.Equal(t, 0, code, errOut)

	w := start(t, "status", "--watch", "--tree", root)
	eventually(t, "the first view", func() bool { return strings.Contains(w.outText(), " succeeded ") })
	c := connect(t)
	data, stat, err := c.Conn().Get(job + ".run")
	require.NoError(t, err)
	var rec map[string]any
	require.NoError(t, json.Unmarshal(data, &rec))
	rec["outcome"] = "running"
	delete(rec, "end")
	data, err = json.Marshal(rec)
	require.NoError(t, err)
	_, err = c.Conn().Set(job+".run", data, stat.Version)
	require.NoError(t, err)
	eventually(t, "the view after the record changed", func() bool { return strings.Contains(w.outText(), " running since ") })

	one := start(t, "status", "--watch", job) // one path's view, with its last run under the queue
	eventually(t, "the path's first view", func() bool {
		return strings.Contains(one.outText(), "last run (once per 1h0m0s): by ") && strings.Contains(one.outText(), "no end recorded")
	})
	rec["outcome"] = "succeeded"
	rec["end"] = time.Now().UnixMilli()
	data, err = json.Marshal(rec)
	require.NoError(t, err)
	_, err = c.Conn().Set(job+".run", data, -1)
	require.NoError(t, err)
	eventually(t, "the path's view after the record changed", func() bool { return strings.Contains(one.outText(), ", succeeded at ") })
}

// status --watch sets a watch on a path only while none is pending there:
// redraws after changes elsewhere leave no goroutine (and no watcher)
// behind for a path that did not change, and a change of it still ends the
// view.
func TestStatusWatchSetsOneWatchAPath(t *testing.T) {
	c := connect(t)
	path := lockPath(t)
	m := mustMutexCLI(t, c, path)
	l, err := m.Acquire(context.Background())
	require.NoError(t, err)
	w := newChangeWatch(c, true)
	w.begin()
	w.add(path)
	before := runtime.NumGoroutine()
	var changed <-chan struct{}
	for range 50 {
		changed = w.begin()
		w.add(path)
		w.addData(path)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before+1, "one data watch added, the child watch still pending")
	require.NoError(t, l.Release(context.Background()))
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("the release did not end the view")
	}
}
