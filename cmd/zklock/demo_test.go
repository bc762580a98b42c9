package main

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDemo runs scripts/demo.sh (what 'make demo' runs) end to end: it must
// exit 0 within a minute and fit on one screen.
func TestDemo(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts its own ZooKeeper and builds zklock; skipped with -short")
	}
	// 12-20 s alone; a run beside the other packages' tests took over 60 s.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../../scripts/demo.sh")
	// Its own process group, ended whole at the deadline: SIGTERM lets the
	// demo's trap stop its server and workers (killing only the shell left
	// its ZooKeeper running after a slow run was cut off).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	began := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(began)
	t.Logf("demo took %v:\n%s", took, out)
	require.NoError(t, err, "demo failed")
	require.Less(t, took, 2*time.Minute)
	text := string(out)
	require.Contains(t, text, "Served in arrival order (1 2 3 4)")
	require.Contains(t, text, "worker 5 got SIGTERM")
	require.Contains(t, text, "worker 6 got the lock")
	require.Contains(t, text, "REFUSED by the fence")
	require.LessOrEqual(t, strings.Count(text, "\n"), 50, "the demo fits on one screen")
}
