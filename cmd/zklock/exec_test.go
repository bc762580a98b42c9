package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/zktest"
)

// TestExecMutualExclusion: four zklock exec run at once on one lock; their
// commands never overlap.
func TestExecMutualExclusion(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	log := filepath.Join(t.TempDir(), "log")
	script := `echo "start $0" >> "$1"; sleep 0.2; echo "end $0" >> "$1"`
	began := time.Now()
	var ps []*proc
	for n := 1; n <= 4; n++ {
		ps = append(ps, start(t, "exec", path, "--", "sh", "-c", script, strconv.Itoa(n), log))
	}
	for _, p := range ps {
		require.Equal(t, 0, p.wait(t, 30*time.Second), p.errText())
	}
	require.GreaterOrEqual(t, time.Since(began), 800*time.Millisecond, "the four 0.2s commands ran one at a time")

	b, err := os.ReadFile(log)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 8, string(b))
	seen := map[string]bool{}
	for i := 0; i < len(lines); i += 2 {
		n := strings.TrimPrefix(lines[i], "start ")
		require.NotEqual(t, lines[i], n, "line %d should be a start: %s", i, b)
		require.Equal(t, "end "+n, lines[i+1], "start %s must be followed by its end:\n%s", n, b)
		require.False(t, seen[n], "worker %s ran twice", n)
		seen[n] = true
	}
	require.Empty(t, contendersOf(t, connect(t), path))
}

// TestExecStatusAndEnv: the command's exit status passes through, 128+N for
// a signal; the command sees ZKLOCK_*; the lock is free when zklock exits.
func TestExecStatusAndEnv(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)

	code, _, _ := runZK(t, 20*time.Second, "exec", path, "--", "sh", "-c", "exit 7")
	require.Equal(t, 7, code)
	require.Empty(t, contendersOf(t, c, path))

	code, _, _ = runZK(t, 20*time.Second, "exec", path, "--", "sh", "-c", "kill -TERM $$")
	require.Equal(t, 128+int(syscall.SIGTERM), code)

	code, out, errOut := runZK(t, 20*time.Second, "exec", path, "--", "sh", "-c", `echo "$ZKLOCK_PATH|$ZKLOCK_NODE|$ZKLOCK_TOKEN"`)
	require.Equal(t, 0, code, errOut)
	f := strings.Split(strings.TrimSpace(out), "|")
	require.Len(t, f, 3, out)
	require.Equal(t, path, f[0])
	require.True(t, strings.HasPrefix(f[1], path+"/_c_"), f[1])
	token, err := strconv.ParseInt(f[2], 10, 64)
	require.NoError(t, err)
	require.Positive(t, token)
	require.Empty(t, contendersOf(t, c, path))
}

// TestExecTimeoutAndTry: --timeout gives up with 75 and leaves no node
// behind; --try fails at once with 73 while the lock is held.
func TestExecTimeoutAndTry(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m, err := c.NewMutex(path)
	require.NoError(t, err)
	lease, err := m.Acquire(context.Background())
	require.NoError(t, err)

	began := time.Now()
	code, _, stderr := runZK(t, 20*time.Second, "exec", "--timeout", "300ms", path, "--", "true")
	took := time.Since(began)
	require.Equal(t, exitTimeout, code, stderr)
	require.Contains(t, stderr, "zklock: timed out after 300ms waiting for "+path)
	require.GreaterOrEqual(t, took, 300*time.Millisecond)
	require.Less(t, took, 5*time.Second)
	require.Len(t, contendersOf(t, c, path), 1, "the waiter's node is gone")

	code, _, stderr = runZK(t, 20*time.Second, "exec", "--try", path, "--", "true")
	require.Equal(t, exitLocked, code, stderr)
	require.Contains(t, stderr, "zklock: lock is held")
	require.Len(t, contendersOf(t, c, path), 1)

	require.NoError(t, lease.Release(context.Background()))
	code, _, stderr = runZK(t, 20*time.Second, "exec", "--try", path, "--", "true")
	require.Equal(t, 0, code, stderr)
}

// TestExecLossStopsCommand: the holder's node is deleted behind its back; the
// command gets SIGTERM and zklock exits 76 naming the cause.
func TestExecLossStopsCommand(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	file := filepath.Join(t.TempDir(), "events")
	p := start(t, "exec", "--grace", "10s", path, "--", "sh", "-c",
		`trap "echo TERM >> $0; exit 0" TERM; echo started >> $0; while :; do sleep 0.1; done`, file)
	cs := waitQueue(t, c, path, 1)
	waitFile(t, file, "started")

	require.NoError(t, c.Conn().Delete(cs[0].Node, -1))
	require.Equal(t, exitLost, p.wait(t, 8*time.Second), "the command stopped on SIGTERM, well within the grace")
	waitFile(t, file, "TERM")
	stderr := p.errText()
	require.Contains(t, stderr, "zklock: lost the lock on "+path+" while the command ran: node "+cs[0].Node+" was deleted by someone else")
	require.NotContains(t, stderr, "killed it")
}

// TestExecLossKillsStubbornCommand: a command that ignores SIGTERM is killed
// after --grace; the lock is broken with 'zklock break'.
func TestExecLossKillsStubbornCommand(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	file := filepath.Join(t.TempDir(), "pid")
	p := start(t, "exec", "--grace", "500ms", path, "--", "sh", "-c",
		`trap "" TERM; echo $$ > $0; while :; do sleep 0.1; done`, file)
	waitQueue(t, c, path, 1)
	waitFile(t, file, "\n")
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)

	code, stdout, stderr := runZK(t, 20*time.Second, "break", "--yes", path)
	broke := time.Now()
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "broke the lock on "+path)

	require.Equal(t, exitLost, p.wait(t, 10*time.Second))
	took := time.Since(broke)
	require.GreaterOrEqual(t, took, 400*time.Millisecond, "SIGKILL waited for the grace period; stderr: %s", p.errText()) // break's own exit takes a moment
	require.Less(t, took, 5*time.Second)
	require.Contains(t, p.errText(), "was deleted by someone else")
	require.Contains(t, p.errText(), "zklock: the command ignored SIGTERM for 500ms; killed it")
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the command is dead and reaped")
}

// TestExecForwardsSignals: a signal to zklock reaches the running command and
// the lock is released after it exits; while waiting, a signal makes zklock
// leave the queue.
func TestExecForwardsSignals(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	file := filepath.Join(t.TempDir(), "events")
	p := start(t, "exec", path, "--", "sh", "-c",
		`trap "echo TERM >> $0; exit 3" TERM; echo started >> $0; while :; do sleep 0.1; done`, file)
	waitQueue(t, c, path, 1)
	waitFile(t, file, "started")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 3, p.wait(t, 10*time.Second), p.errText())
	waitFile(t, file, "TERM")
	require.Empty(t, contendersOf(t, c, path))

	m, err := c.NewMutex(path)
	require.NoError(t, err)
	lease, err := m.Acquire(context.Background())
	require.NoError(t, err)
	defer lease.Release(context.Background())
	w := start(t, "exec", path, "--", "true")
	waitQueue(t, c, path, 2)
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 128+int(syscall.SIGINT), w.wait(t, 10*time.Second))
	require.Contains(t, w.errText(), fmt.Sprintf("zklock: stopped by SIGINT while waiting for %s", path))
	require.Len(t, contendersOf(t, c, path), 1, "the waiter left the queue")
}

// TestExecSessionCut: the holder's connection stalls (a partition); zklock
// presumes the lock lost before the session can expire, stops the command and
// exits 76, and the next in line gets the lock once the server expires the
// session. A 2 s session: with 1 s, a loaded machine's late keep-alive lost
// the lock before the next in line had queued.
func TestExecSessionCut(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	file := filepath.Join(t.TempDir(), "events")
	p := start(t, "exec", "--servers", proxy.Addr(), "--session-timeout", "2s", "--grace", "5s", path, "--", "sh", "-c",
		`trap "echo TERM >> $0; exit 0" TERM; echo started >> $0; while :; do sleep 0.1; done`, file)
	waitQueue(t, c, path, 1)
	waitFile(t, file, "started")
	next := start(t, "exec", path, "--", "sh", "-c", `echo next >> $0`, file)
	waitQueue(t, c, path, 2)

	proxy.Stall()
	require.Equal(t, exitLost, p.wait(t, 10*time.Second), p.errText())
	require.Contains(t, p.errText(), "zklock: lost the lock on "+path+" while the command ran")
	require.Equal(t, 0, next.wait(t, 10*time.Second), next.errText())
	waitFile(t, file, "TERM")
	waitFile(t, file, "next")
}

// TestExecReadSharesWriteExcludes: two --read commands run at once (each
// waits for the other to have started), a --write waits for both.
func TestExecReadSharesWriteExcludes(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	dir := t.TempDir()
	// Each reader marks itself in, then waits up to 10s for the other's mark.
	reader := `touch "$1/$0"; for i in $(seq 100); do [ -e "$1/$2" ] && exit 0; sleep 0.1; done; exit 9`
	r1 := start(t, "exec", "--read", path, "--", "sh", "-c", reader, "r1", dir, "r2")
	r2 := start(t, "exec", "--read", path, "--", "sh", "-c", reader, "r2", dir, "r1")
	require.Equal(t, 0, r1.wait(t, 30*time.Second), r1.errText())
	require.Equal(t, 0, r2.wait(t, 30*time.Second), r2.errText())

	c := connect(t)
	rw, err := c.NewRWMutex(path)
	require.NoError(t, err)
	l, err := rw.AcquireRead(context.Background())
	require.NoError(t, err)
	code, _, errOut := runZK(t, 20*time.Second, "exec", "--write", "--try", path, "--", "true")
	require.Equal(t, exitLocked, code, errOut)
	code, _, errOut = runZK(t, 20*time.Second, "exec", "--read", "--try", path, "--", "true")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, l.Release(context.Background()))

	code, _, errOut = runZK(t, 20*time.Second, "exec", "--read", "--write", path, "--", "true")
	require.Equal(t, exitUsage, code, errOut)
}

// TestExecSemaphore: with --semaphore 2, two commands hold at once and a
// third --try is refused; a different N is refused too.
func TestExecSemaphore(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s, err := c.NewSemaphore(path, 2)
	require.NoError(t, err)
	l, err := s.Acquire(context.Background())
	require.NoError(t, err)
	code, out, errOut := runZK(t, 20*time.Second, "exec", "--semaphore", "2", "--try", path, "--", "sh", "-c", `echo "$ZKLOCK_NODE"`)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, path+"/leases/")
	l2, err := s.Acquire(context.Background())
	require.NoError(t, err)
	code, _, errOut = runZK(t, 20*time.Second, "exec", "--semaphore", "2", "--try", path, "--", "true")
	require.Equal(t, exitLocked, code, errOut)
	code, _, errOut = runZK(t, 20*time.Second, "exec", "--semaphore", "3", "--try", path, "--", "true")
	require.Equal(t, exitSoftware, code, errOut)
	require.Contains(t, errOut, "limit")
	require.NoError(t, l.Release(context.Background()))
	require.NoError(t, l2.Release(context.Background()))
}

// TestExecSeveralPaths: with --and, exec takes every path, in sorted order,
// and releases them all; --try fails if any is held, leaving the others free.
func TestExecSeveralPaths(t *testing.T) {
	t.Parallel()
	a, b := lockPath(t), lockPath(t)
	c := connect(t)
	code, out, errOut := runZK(t, 20*time.Second, "exec", b, "--and", a, "--", "sh", "-c", `echo "$ZKLOCK_PATH"; echo "$ZKLOCK_TOKENS"; echo "$ZKLOCK_TOKEN"`)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Equal(t, a+","+b, lines[0])
	// Each path's own token; ZKLOCK_TOKEN is the largest.
	var toks []int64
	for i, kv := range strings.Split(lines[1], ",") {
		k, v, ok := strings.Cut(kv, "=")
		require.True(t, ok, lines[1])
		require.Equal(t, []string{a, b}[i], k)
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err)
		toks = append(toks, n)
	}
	require.Equal(t, strconv.FormatInt(max(toks[0], toks[1]), 10), lines[2])
	require.NotEqual(t, toks[0], toks[1])

	code, _, errOut = runZK(t, 20*time.Second, "exec", "--semaphore", "0", a, "--", "true")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--semaphore must be at least 1")

	m, err := c.NewMutex(b)
	require.NoError(t, err)
	l, err := m.Acquire(context.Background())
	require.NoError(t, err)
	code, _, errOut = runZK(t, 20*time.Second, "exec", "--try", a, "--and", b, "--", "true")
	require.Equal(t, exitLocked, code, errOut)
	require.Empty(t, contendersOf(t, c, a), "nothing left on the free path")
	require.NoError(t, l.Release(context.Background()))

	code, _, errOut = runZK(t, 20*time.Second, "exec", "--read", a, "--and", b, "--", "true")
	require.Equal(t, exitUsage, code, errOut)
	code, _, errOut = runZK(t, 20*time.Second, "exec", a, "--and", "relative", "--", "true")
	require.Equal(t, exitUsage, code, errOut)

	// Without --and, an absolute command before a later -- is the command,
	// as it always was.
	code, out, errOut = runZK(t, 20*time.Second, "exec", a, "/bin/echo", "--", "x")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "-- x", strings.TrimSpace(out))
}

// Different kinds of lock on one path exclude each other by refusing: while
// a semaphore holds the path, an exclusive lock and a reader exit 2 naming
// the semaphore's layout, and run nothing.
func TestExecRefusesAnotherRecipe(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	holder := start(t, "exec", "--semaphore", "2", path, "--", "sleep", "30")
	eventually(t, "the semaphore lease", func() bool { return len(contendersOf(t, c, path)) == 1 })
	for _, args := range [][]string{{"exec", "--try", path, "--", "true"}, {"exec", "--read", path, "--", "true"}} {
		code, out, stderr := runZK(t, 20*time.Second, args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		require.Empty(t, out)
		require.Contains(t, stderr, "zklock: refusing to share "+path+": "+path+" holds ")
		require.Contains(t, stderr, "a node of a semaphore's layout")
		require.Contains(t, stderr, "zklock primitive for this path: Semaphore")
	}
	require.Len(t, contendersOf(t, c, path), 1, "nothing queued")
	_ = holder
}

// kill -9 of zklock exec takes the command's whole process tree down: a
// grandchild the command started in the background is stopped too (the
// reaper), within --grace.
func TestExecKilledTakesTheTreeDown(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	p := start(t, "exec", "--grace", "1s", path, "--", "sh", "-c", `sleep 300 & echo $! > $0; wait`, pidFile)
	waitQueue(t, c, path, 1)
	waitFile(t, pidFile, "\n")
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	grandchild, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(grandchild, 0), "the grandchild runs")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	p.wait(t, 5*time.Second)
	eventually(t, "the grandchild stopped", func() bool { return syscall.Kill(grandchild, 0) != nil })
}
