package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestExecMaxHoldStopsTheCommand: a command that outlives --max-hold gets
// SIGTERM, the lock is released (its node gone), and zklock exits 79.
func TestExecMaxHoldStopsTheCommand(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	file := filepath.Join(t.TempDir(), "events")
	// SIGTERM at half the limit (the grace is longer than it), SIGKILL a
	// tenth before it: 1.2 s between them, for the shell to leave its
	// sleep and run its trap on a loaded machine (0.28 s at 700ms was not).
	p := start(t, "exec", "--max-hold", "3s", "--grace", "10s", path, "--", "sh", "-c",
		`trap "echo TERM >> $0; exit 0" TERM; echo started >> $0; while :; do sleep 0.1; done`, file)
	waitQueue(t, c, path, 1)
	waitFile(t, file, "started")

	require.Equal(t, exitHoldLimit, p.wait(t, 10*time.Second), p.errText())
	waitFile(t, file, "TERM")
	require.Contains(t, p.errText(), "of --max-hold 3s; stopping it before the limit: SIGTERM now, SIGKILL at 2.7s")
	require.Empty(t, contendersOf(t, c, path), "the node is gone")
}

// TestExecMaxHoldNoRunOutlivesItsLock: a command that ignores SIGTERM (and
// its background child) is killed before --max-hold frees the lock, so the
// next holder, waiting meanwhile, never runs while either lives; once-per
// records the hold limit.
func TestExecMaxHoldNoRunOutlivesItsLock(t *testing.T) {
	t.Parallel()
	for _, job := range []bool{false, true} {
		path := lockPath(t)
		c := connect(t)
		dir := t.TempDir()
		pids, events := filepath.Join(dir, "pids"), filepath.Join(dir, "events")
		args := []string{"exec", "--max-hold", "2s", "--grace", "10s"}
		if job {
			args = append(args, "--once-per", "1h")
		}
		p := start(t, append(args, path, "--", "sh", "-c",
			`trap "" TERM; sleep 1000 & echo $! $$ > $0; echo started >> $1; while :; do sleep 0.05; done`, pids, events)...)
		waitQueue(t, c, path, 1)
		waitFile(t, events, "started")
		// The next holder says whether the first run's processes still live.
		next := start(t, "exec", path, "--", "sh", "-c",
			`for p in $(cat $0); do if [ -e /proc/$p ] && ! grep -q ') Z ' /proc/$p/stat; then echo alive $p >> $1; fi; done; echo second >> $1`, pids, events)
		require.Equal(t, exitHoldLimit, p.wait(t, 20*time.Second), p.errText())
		require.Equal(t, 0, next.wait(t, 20*time.Second), next.errText())
		b, err := os.ReadFile(events)
		require.NoError(t, err)
		require.Equal(t, "started\nsecond\n", string(b), "the second run started while the first lived")
		require.Contains(t, p.errText(), "killed it before the --max-hold limit")
		if job {
			st := jobState(t, path)
			require.Equal(t, "failed", st.Last.Outcome)
			require.Equal(t, "hold-limit", st.Last.Cause)
		}
	}
}

// TestExecStopsTheCommandsLeftovers: what the command leaves in its process
// group (a background child; the children of a command killed by SIGKILL)
// is stopped before the lock is released: the next holder never runs while
// it lives. The exit status stays the command's.
func TestExecStopsTheCommandsLeftovers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		script string
		code   int
	}{
		{`sleep 1000 & echo $! > $0; echo started >> $1`, 0},
		{`trap "" TERM; sh -c 'trap "" TERM; sleep 1000' & echo $! > $0; echo started >> $1; kill -9 $$`, 128 + 9},
	} {
		path := lockPath(t)
		dir := t.TempDir()
		pids, events := filepath.Join(dir, "pids"), filepath.Join(dir, "events")
		p := start(t, "exec", "--grace", "500ms", path, "--", "sh", "-c", tc.script, pids, events)
		require.Equal(t, tc.code, p.wait(t, 20*time.Second), p.errText())
		require.Contains(t, p.errText(), "the command exited leaving processes in its process group")
		code, _, stderr := runZK(t, 20*time.Second, "exec", path, "--", "sh", "-c",
			`for p in $(cat $0); do if [ -e /proc/$p ] && ! grep -q ') Z ' /proc/$p/stat; then echo alive $p >> $1; fi; done; echo second >> $1`, pids, events)
		require.Equal(t, 0, code, stderr)
		b, err := os.ReadFile(events)
		require.NoError(t, err)
		require.Equal(t, "started\nsecond\n", string(b), "the leftovers outlived the lock: %s", p.errText())
	}
}
