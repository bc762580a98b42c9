package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestExecOncePerOnThreeHosts: the same crontab line started on three hosts
// at once runs the command once; the others exit 80 at once naming the
// cause, and a later start in the same period names the run.
func TestExecOncePerOnThreeHosts(t *testing.T) {
	path := lockPath(t)
	file := filepath.Join(t.TempDir(), "runs")
	line := []string{"exec", "--once-per", "1h", path, "--", "sh", "-c", `echo ran >> $0; sleep 0.3`, file}
	procs := []*proc{start(t, line...), start(t, line...), start(t, line...)}
	codes := map[int]int{}
	for _, p := range procs {
		code := p.wait(t, 20*time.Second)
		codes[code]++
		if code == exitNotThisTime {
			require.Contains(t, p.errText(), "zklock: not run: ")
		} else {
			require.Equal(t, 0, code, p.errText())
		}
	}
	require.Equal(t, map[int]int{0: 1, exitNotThisTime: 2}, codes)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "ran\n", string(b), "the command ran once")

	code, _, stderr := runZK(t, 20*time.Second, line...)
	require.Equal(t, exitNotThisTime, code, stderr)
	require.Contains(t, stderr, "was run this period (1h0m0s) by ")
	require.Contains(t, stderr, "succeeded at ")
	host, _ := os.Hostname()
	require.True(t, strings.Contains(stderr, "by "+host+" pid "), stderr)

	code, stdout, stderr := runZK(t, 20*time.Second, "status", path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "last run (once per 1h0m0s): by "+host+" pid ")
}

// TestExecOncePerRecordsAFailure: a failing command is recorded as failed,
// and not run again in its period.
func TestExecOncePerRecordsAFailure(t *testing.T) {
	path := lockPath(t)
	code, _, stderr := runZK(t, 20*time.Second, "exec", "--once-per", "1h", path, "--", "sh", "-c", "exit 3")
	require.Equal(t, 3, code, stderr)
	code, _, stderr = runZK(t, 20*time.Second, "exec", "--once-per", "1h", path, "--", "true")
	require.Equal(t, exitNotThisTime, code, stderr)
	require.Contains(t, stderr, "failed at ")
	require.Contains(t, stderr, ": exit status 3")
}
