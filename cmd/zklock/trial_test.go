package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/internal/lockpath"
)

var lockpathShort = lockpath.Short

// The help of --semaphore says what exec does: 0 is refused, not an
// exclusive lock.
func TestExecHelpSemaphoreZero(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run([]string{"help", "exec"}, &stdout, &stderr))
	require.NotContains(t, stdout.String(), "0: an exclusive lock")
	require.Contains(t, stdout.String(), "N at least 1 (without it the lock is exclusive)")
	stdout.Reset()
	require.Equal(t, exitUsage, run([]string{"exec", "--semaphore", "0", "/a", "--", "true"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "zklock: --semaphore must be at least 1 (leave it out for an exclusive lock)")
}

// An address without a port gets ZooKeeper's 2181, as zkCli, Curator and
// kazoo give it; the chroot stays after the last address.
func TestServersDefaultPort(t *testing.T) {
	t.Parallel()
	cf := &connFlags{servers: "localhost, [::1],zk3:2182/app"}
	require.Empty(t, checkServers(cf.servers))
	require.Equal(t, []string{"localhost:2181", "[::1]:2181", "zk3:2182/app"}, cf.list())
	cf = &connFlags{servers: "zk1/app"}
	require.Equal(t, []string{"zk1:2181/app"}, cf.list())
	require.NotEmpty(t, checkServers("::1"), "a bare IPv6 address is ambiguous")

	// On the command line: no usage error, a dial to port 2181.
	code, _, stderr := runZK(t, 20*time.Second, "status", "--servers", "127.0.0.1", "--connect-timeout", "300ms", "/zklock-cmd-test/nobody")
	if code != exitOK { // something may serve 2181 on this machine
		require.Equal(t, exitUnavailable, code, stderr)
		require.Contains(t, stderr, "zklock: cannot reach ZooKeeper at 127.0.0.1:2181: ")
	}
}

// status --tree / lists every lock path of the ensemble.
func TestStatusTreeOfTheWholeTree(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := mustMutexCLI(t, c, path)
	lease, err := m.Acquire(zklock.ContextWithOwner(context.Background(), "tree-root"))
	require.NoError(t, err)
	defer lease.Release(context.Background())

	code, out, stderr := runZK(t, 20*time.Second, "status", "--tree", "/")
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(path)+` +tree-root +\S+ +\d+ +\S+ +0 +-$`, out)
	require.NotContains(t, out, "/zookeeper")
}

// Every --json of status has one form: an array, one element per line.
func TestStatusJSONOneForm(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	lease, err := mustMutexCLI(t, c, path).Acquire(context.Background())
	require.NoError(t, err)
	defer lease.Release(context.Background())
	root := strings.TrimSuffix(path, "/lock")
	for _, args := range [][]string{{"status", "--json", path}, {"status", "--tree", "--json", root}} {
		code, out, stderr := runZK(t, 20*time.Second, args...)
		require.Equal(t, exitOK, code, stderr)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		require.Len(t, lines, 3, "%v:\n%s", args, out)
		require.Equal(t, "[", lines[0])
		require.Equal(t, "]", lines[2])
		var elem map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[1]), &elem), "%v: one element on one line", args)
		var all []map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &all))
	}
}

// --version names the build.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"--version", "version"} {
		code, out, stderr := runZK(t, 10*time.Second, arg)
		require.Equal(t, exitOK, code, stderr)
		require.Regexp(t, `^zklock \S+( commit [0-9a-f]{12}( \(modified\))?)? go1\.\d+\S*\n$`, out)
	}
}

// On a read/write path held by two readers, break --yes deletes both (one
// alone frees nothing) and says so; leader refuses the path, whose readers
// lead nothing.
func TestBreakAndLeaderOnReaders(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	rw, err := c.NewRWMutex(path)
	require.NoError(t, err)
	for range 2 {
		_, err := rw.AcquireRead(context.Background())
		require.NoError(t, err)
	}
	cs := waitQueue(t, c, path, 2)

	code, out, stderr := runZK(t, 20*time.Second, "leader", path)
	require.Equal(t, exitUsage, code, out)
	require.Empty(t, out)
	require.Equal(t, "zklock: "+path+" is a read/write lock, not an election: node "+lockpathShort(cs[0].Node)+
		" holds as one of its readers or writer, and no one leads; 'zklock status "+path+"' shows its holders\n", stderr)

	code, out, stderr = runZK(t, 20*time.Second, "break", "--yes", path)
	require.Equal(t, exitOK, code, stderr)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 2, out)
	for i, l := range lines {
		require.True(t, strings.HasPrefix(l, "broke the lock on "+path+": deleted the node "+lockpathShort(cs[i].Node)+" of one of its 2 holders (host "), l)
	}
	require.Empty(t, contendersOf(t, c, path))
}

// Without Java or ZooKeeper, 'zklock server' says how to install them, not
// the test harness's ways ($ZKLOCK_TEST_SERVERS, Docker).
func TestServerWithoutAnInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("JAVA_HOME", "")
	code, out, stderr := runZK(t, 20*time.Second, "server")
	require.Equal(t, exitFailure, code, stderr)
	require.Empty(t, out)
	require.Equal(t, "zklock: cannot start ZooKeeper: no java found (JAVA_HOME unset or invalid, none on PATH); 'zklock server' needs Java and a local ZooKeeper: the Debian/Ubuntu zookeeper package, or $ZOOKEEPER_HOME set to an unpacked Apache ZooKeeper release (scripts/install-zookeeper.sh in zklock's repository installs both)\n", stderr)
}

// After break --ask, the holder's record is still there beside the request:
// status and break --yes name the holder, and say it was asked to release.
// (A node whose record Curator's Revoker replaced is described as such.)
func TestBreakAfterAsk(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	lease, err := mustMutexCLI(t, c, path).Acquire(context.Background())
	require.NoError(t, err)
	code, out, stderr := runZK(t, 20*time.Second, "break", "--ask", path)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, out, "asked the holder of "+path+" to release")
	<-lease.RevokeRequested()

	host, _ := os.Hostname()
	code, out, stderr = runZK(t, 20*time.Second, "status", path)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, out, "HOLDER (asked to release)")
	require.Contains(t, out, host)

	code, out, stderr = runZK(t, 20*time.Second, "break", "--yes", path)
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, "^broke the lock on "+regexp.QuoteMeta(path)+": deleted the holder's node "+regexp.QuoteMeta(lockpathShort(lease.Node()))+
		" \\(host "+regexp.QuoteMeta(host)+", pid [0-9]+, client [0-9a-f]+, queued .* ago, asked to release\\)\n$", out)
	<-lease.Done()
}
