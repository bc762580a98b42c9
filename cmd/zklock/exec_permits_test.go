package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestExecPermits: --semaphore 3 --permits 2 holds two leases of the path
// while the command runs (and releases both), is refused with --try when
// only one is free, and bad counts are usage errors.
func TestExecPermits(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s, err := c.NewSemaphore(path, 3)
	require.NoError(t, err)
	code, out, errOut := runZK(t, 20*time.Second, "exec", "--semaphore", "3", "--permits", "2", path, "--",
		"sh", "-c", `echo "$ZKLOCK_NODE"; echo "$ZKLOCK_TOKENS"; echo "$ZKLOCK_TOKEN"`)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	nodes := strings.Split(lines[0], ",")
	require.Len(t, nodes, 2, "one lease node per permit")
	for _, n := range nodes {
		require.Contains(t, n, path+"/leases/")
	}
	require.Equal(t, path+"="+lines[2], lines[1], "one path: ZKLOCK_TOKENS is ZKLOCK_TOKEN")
	_, err = strconv.ParseInt(lines[2], 10, 64)
	require.NoError(t, err)
	free, err := s.Free(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, free, "both permits released")

	l, err := s.AcquireN(context.Background(), 2)
	require.NoError(t, err)
	code, _, errOut = runZK(t, 20*time.Second, "exec", "--semaphore", "3", "--permits", "2", "--try", path, "--", "true")
	require.Equal(t, exitLocked, code, errOut)
	code, _, errOut = runZK(t, 20*time.Second, "exec", "--semaphore", "3", "--try", path, "--", "true")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, l.Release(context.Background()))

	for _, args := range [][]string{
		{"--semaphore", "3", "--permits", "4"},
		{"--semaphore", "3", "--permits", "0"},
		{"--permits", "2"},
	} {
		code, _, errOut = runZK(t, 20*time.Second, append(append([]string{"exec"}, args...), path, "--", "true")...)
		require.Equal(t, exitUsage, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, "--permits")
	}
}
