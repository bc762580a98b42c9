package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// bin is the zklock binary built once for all tests; cluster is the
// ZooKeeper they share (each test uses its own lock paths).
var (
	bin     string
	cluster *zktest.Cluster
)

// netnsChild, set in the environment, runs a test inside 'unshare -rn': a
// network namespace of its own, where it may take the loopback down.
const netnsChild = "ZKLOCK_TEST_NETNS_CHILD"

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if os.Getenv(netnsChild) != "" { // a test re-run in a network namespace: needs neither
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "zklock-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "zklock")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race") // subprocesses report data races too
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building zklock: %v\n%s", err, out)
		return 1
	}
	c, stop, err := zktest.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	cluster = c
	return m.Run()
}

// proc is one zklock subprocess. Its output goes to files, which can be read
// while it runs and never keep Wait waiting for a grandchild.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr string // file names
	done           chan struct{}
	code           int // exit code, valid after done
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	return startWith(t, nil, args...)
}

// startWith is start with env added to zklock's environment.
func startWith(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	dir := t.TempDir()
	p := &proc{stdout: filepath.Join(dir, "stdout"), stderr: filepath.Join(dir, "stderr"), done: make(chan struct{})}
	out, err := os.Create(p.stdout)
	require.NoError(t, err)
	errf, err := os.Create(p.stderr)
	require.NoError(t, err)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), envServers+"="+strings.Join(cluster.Addrs(), ","),
		"GORACE=atexit_sleep_ms=0") // a -race binary otherwise lingers 1s at exit
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = out, errf
	require.NoError(t, p.cmd.Start())
	out.Close()
	errf.Close()
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM) // zklock stops its command
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait returns the exit code, failing the test if the process runs longer than d.
func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(d):
		t.Fatalf("zklock %s still running after %v; stderr:\n%s", strings.Join(p.cmd.Args[1:], " "), d, p.errText())
		return 0
	}
}

func (p *proc) outText() string { b, _ := os.ReadFile(p.stdout); return string(b) }
func (p *proc) errText() string { b, _ := os.ReadFile(p.stderr); return string(b) }

// runZK runs zklock to completion (bounded by d) and returns its exit code,
// stdout and stderr.
// startSlack is what a bound on a spawned run allows for the race-built
// binary's own start and exit on a loaded 2-core machine (a fresh-clone run
// measured 2.3 s).
const startSlack = 5 * time.Second

func runZK(t *testing.T, d time.Duration, args ...string) (int, string, string) {
	t.Helper()
	p := start(t, args...)
	code := p.wait(t, d)
	return code, p.outText(), p.errText()
}

// connect opens a library client on the shared server for observing and
// arranging the tests' locks.
func connect(t *testing.T) *zklock.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, cluster.Addrs(), zklock.WithSessionTimeout(4*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

var pathSeq atomic.Int64

func lockPath(t *testing.T) string {
	return fmt.Sprintf("/zklock-cmd-test/%s-%d/lock", strings.ReplaceAll(t.Name(), "/", "_"), pathSeq.Add(1))
}

// eventually polls cond every 20ms until it holds, failing after 20s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, 20*time.Second, what, cond)
}

// eventuallyWithin is eventually failing after d.
func eventuallyWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func contendersOf(t *testing.T, c *zklock.Client, path string) []zklock.Contender {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Contenders(ctx, path)
	require.NoError(t, err)
	return cs
}

// waitQueue waits until path has exactly n contenders and returns them.
func waitQueue(t *testing.T, c *zklock.Client, path string, n int) []zklock.Contender {
	t.Helper()
	var cs []zklock.Contender
	eventually(t, fmt.Sprintf("%d contenders on %s", n, path), func() bool {
		cs = contendersOf(t, c, path)
		return len(cs) == n
	})
	return cs
}

// waitFile waits until the file contains s.
func waitFile(t *testing.T, name, s string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%q in %s", s, name), func() bool {
		b, _ := os.ReadFile(name)
		return strings.Contains(string(b), s)
	})
}

// TestUsage runs the dispatcher in-process for help and usage errors (none of
// these reach ZooKeeper or touch signals).
func TestUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{nil, exitUsage, "", "Commands:"},
		{[]string{"help"}, exitOK, "Commands:", ""},
		{[]string{"-h"}, exitOK, "Commands:", ""},
		{[]string{"help", "exec"}, exitOK, "Usage: zklock exec", ""},
		{[]string{"help", "status"}, exitOK, "--json", ""},
		{[]string{"help", "break"}, exitOK, "Usage: zklock break", ""},
		{[]string{"help", "server"}, exitOK, "ZKLOCK_SERVERS=127.0.0.1:PORT", ""},
		{[]string{"exec", "-h"}, exitOK, "Exit status:", ""},
		{[]string{"status", "--help"}, exitOK, "Usage: zklock status", ""},
		{[]string{"help", "nope"}, exitUsage, "", `zklock: unknown help topic "nope"; run 'zklock help'`},
		{[]string{"nope"}, exitUsage, "", `zklock: unknown command "nope"`},
		{[]string{"exec"}, exitUsage, "", "zklock: missing the lock path and the command; run 'zklock help exec' for usage"},
		{[]string{"exec", "/a"}, exitUsage, "", "missing the command"},
		{[]string{"exec", "a", "--", "true"}, exitUsage, "", "must be absolute"},
		{[]string{"exec", "--nope", "/a", "--", "true"}, exitUsage, "", "flag provided but not defined: -nope"},
		{[]string{"exec", "--timeout", "-1s", "/a", "--", "true"}, exitUsage, "", "--timeout must not be negative"},
		{[]string{"exec", "--servers", " , ", "/a", "--", "true"}, exitUsage, "", "--servers is empty"},
		{[]string{"exec", "/a", "--", "no-such-command-zklock"}, exitNotFound, "", `cannot run "no-such-command-zklock": executable file not found`},
		{[]string{"exec", "/a", "--", "/nonexistent/cmd"}, exitNotFound, "", `cannot run "/nonexistent/cmd"`},
		{[]string{"status"}, exitUsage, "", "missing the lock path"},
		{[]string{"status", "/a", "b"}, exitUsage, "", "must be absolute"},
		{[]string{"status", "--tree", "/a", "/b"}, exitUsage, "", "--tree takes one root path"},
		{[]string{"exec", "--read", "--semaphore", "2", "/a", "--", "true"}, exitUsage, "", "exclude each other"},
		{[]string{"exec", "--semaphore", "-1", "/a", "--", "true"}, exitUsage, "", "--semaphore must be at least 1"},
		{[]string{"exec", "--write", "/a", "--and", "/b", "--", "true"}, exitUsage, "", "take one lock path"},
		{[]string{"exec", "--kazoo", "/a", "--", "true"}, exitUsage, "", "use it with --read or --write"},
		{[]string{"status", "/zookeeper/x"}, exitUsage, "", "reserved"},
		{[]string{"server", "x"}, exitUsage, "", "server takes no arguments"},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			require.Equal(t, tc.code, code, "stderr: %s", stderr.String())
			require.Contains(t, stdout.String(), tc.stdout)
			require.Contains(t, stderr.String(), tc.stderr)
			if tc.code != exitOK {
				require.True(t, strings.HasPrefix(stderr.String(), "zklock: ") || tc.args == nil, "stderr: %s", stderr.String())
				require.Empty(t, stdout.String())
			}
		})
	}
}

func TestParseArgs(t *testing.T) {
	t.Parallel()
	fs := execCmd.flagSet()
	pos, err := parseExecArgs(fs, []string{"--timeout", "1s", "/p", "--try", "--", "ls", "-l", "--", "x"})
	require.NoError(t, err)
	require.Equal(t, []string{"/p", "ls", "-l", "--", "x"}, pos)
	require.True(t, flagValue[bool](fs, "try"))
	require.Equal(t, time.Second, flagValue[time.Duration](fs, "timeout"))

	fs = execCmd.flagSet()
	pos, err = parseExecArgs(fs, []string{"/p", "ls", "-l"})
	require.NoError(t, err)
	require.Equal(t, []string{"/p", "ls", "-l"}, pos)

	fs = execCmd.flagSet()
	pos, err = parseExecArgs(fs, []string{"/b", "--and", "/a", "--try", "--and", "/c", "--", "ls"})
	require.NoError(t, err)
	require.Equal(t, []string{"/b", "ls"}, pos)
	require.Equal(t, []string{"/a", "/c"}, flagValue[[]string](fs, "and"))

	fs = statusCmd.flagSet()
	pos, err = parseInterleaved(fs, []string{"/p", "--json", "--servers", "h:1"})
	require.NoError(t, err)
	require.Equal(t, []string{"/p"}, pos)
	require.True(t, flagValue[bool](fs, "json"))
	require.Equal(t, "h:1", flagValue[string](fs, "servers"))

	_, err = parseInterleaved(statusCmd.flagSet(), []string{"-h"})
	require.True(t, errors.Is(err, flag.ErrHelp))
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	start := time.Now()
	code, _, stderr := runZK(t, 20*time.Second, "status", "--servers", "127.0.0.1:1", "--connect-timeout", "500ms", "/a")
	require.Equal(t, exitUnavailable, code)
	require.Contains(t, stderr, "zklock: cannot reach ZooKeeper at 127.0.0.1:1: ")
	require.Contains(t, stderr, "connection refused")
	code, _, stderr = runZK(t, 20*time.Second, "exec", "--servers", "127.0.0.1:1", "--connect-timeout", "500ms", "/a", "--", "true")
	require.Equal(t, exitUnavailable, code)
	require.Contains(t, stderr, "cannot reach ZooKeeper")
	require.Less(t, time.Since(start), 10*time.Second)
}
