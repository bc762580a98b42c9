package main

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// TestLockHoldsUntilInterrupted: 'zklock lock' prints the node and token
// once it holds, keeps the lock (a second lock waits), and releases it on
// SIGINT with exit 0, after which the waiter holds.
func TestLockHoldsUntilInterrupted(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	p := start(t, "lock", path)
	cs := waitQueue(t, c, path, 1)
	waitFile(t, p.stdout, "\n")
	require.Equal(t, "holding "+path+": node "+cs[0].Node+" token "+strconv.FormatInt(cs[0].Token, 10)+"\n", p.outText())
	require.Equal(t, "operator", cs[0].Owner.Name)

	second := start(t, "lock", path)
	waitQueue(t, c, path, 2)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 0, p.wait(t, 10*time.Second), p.errText())
	require.True(t, strings.HasSuffix(p.outText(), "released "+path+"\n"))
	waitFile(t, second.stdout, "holding")
	require.Len(t, contendersOf(t, c, path), 1)
}

// TestLockLossExits76: the held node deleted behind its back ends 'zklock
// lock' with 76 and the cause.
func TestLockLossExits76(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	p := start(t, "lock", path)
	cs := waitQueue(t, c, path, 1)
	waitFile(t, p.stdout, "holding")
	require.NoError(t, c.Conn().Delete(cs[0].Node, -1))
	require.Equal(t, exitLost, p.wait(t, 10*time.Second))
	require.Contains(t, p.errText(), "zklock: lost the lock on "+path+": node "+cs[0].Node+" was deleted by someone else")
}

// TestLockBrokenAsOverdueWhileStopped: 'zklock lock --max-hold' stopped
// (SIGSTOP) past its limit is broken by a waiter with WithBreakOverdue; once
// it runs again it exits 79 saying so, not that it released the lock.
func TestLockBrokenAsOverdueWhileStopped(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	p := start(t, "lock", "--max-hold", "300ms", "--session-timeout", "6s", path)
	cs := waitQueue(t, c, path, 1)
	waitFile(t, p.stdout, "holding")
	eventually(t, "the holder's grant stamp", func() bool {
		cs = contendersOf(t, c, path)
		return len(cs) == 1 && cs[0].Owner.Held
	})
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGSTOP))
	waiter, err := zklock.Connect(context.Background(), cluster.Addrs(), zklock.WithSessionTimeout(4*time.Second), zklock.WithBreakOverdue())
	require.NoError(t, err)
	defer waiter.Close()
	m, err := waiter.NewMutex(path)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := m.Acquire(ctx) // breaks the stopped holder past 300ms + half its session timeout
	require.NoError(t, err)
	defer l.Release(context.Background())
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGCONT))
	require.Equal(t, exitHoldLimit, p.wait(t, 10*time.Second), p.errText())
	t.Log(p.errText())
	require.Contains(t, p.errText(), "broken by a waiter")
	require.NotContains(t, p.errText(), "released")
}
