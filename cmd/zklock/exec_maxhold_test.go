package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestExecMaxHoldStopsTheCommand: a command that outlives --max-hold gets
// SIGTERM, the lock is released (its node gone), and zklock exits 79.
func TestExecMaxHoldStopsTheCommand(t *testing.T) {
	path := lockPath(t)
	c := connect(t)
	file := filepath.Join(t.TempDir(), "events")
	p := start(t, "exec", "--max-hold", "700ms", "--grace", "10s", path, "--", "sh", "-c",
		`trap "echo TERM >> $0; exit 0" TERM; echo started >> $0; while :; do sleep 0.1; done`, file)
	waitQueue(t, c, path, 1)
	waitFile(t, file, "started")

	require.Equal(t, exitHoldLimit, p.wait(t, 10*time.Second), p.errText())
	waitFile(t, file, "TERM")
	require.Contains(t, p.errText(), "zklock: the command held "+path+" for --max-hold 700ms; stopping it")
	require.Empty(t, contendersOf(t, c, path), "the node is gone")
}
