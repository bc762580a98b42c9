package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// The help of --semaphore says what exec does: 0 is refused, not an
// exclusive lock.
func TestExecHelpSemaphoreZero(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run([]string{"help", "exec"}, &stdout, &stderr))
	require.NotContains(t, stdout.String(), "0: an exclusive lock")
	require.Contains(t, stdout.String(), "N at least 1 (without it the lock is exclusive)")
	stdout.Reset()
	require.Equal(t, exitUsage, run([]string{"exec", "--semaphore", "0", "/a", "--", "true"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "zklock: --semaphore must be at least 1 (leave it out for an exclusive lock)")
}
