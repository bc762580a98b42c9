package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/zktest"
)

// httpAddrOf waits for the line naming where p serves (prefix, then the
// address up to the line's end, or to the next "/") and returns it.
func httpAddrOf(t *testing.T, file, prefix string) string {
	t.Helper()
	var addr string
	eventually(t, prefix+" in "+file, func() bool {
		b, _ := os.ReadFile(file)
		_, rest, ok := strings.Cut(string(b), prefix)
		if !ok || !strings.Contains(rest, "\n") {
			return false
		}
		addr, _, _ = strings.Cut(strings.SplitN(rest, "\n", 2)[0], "/")
		return true
	})
	return addr
}

func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var v map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	return resp.StatusCode, v
}

// TestServe runs 'zklock serve': a lock held over its stream, and SIGTERM
// ends the stream with "released" and exits 0.
func TestServe(t *testing.T) {
	t.Parallel()
	code, _, stderr := runZK(t, 10*time.Second, "serve", "--listen", "0.0.0.0:0")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "not a loopback address: give --token-file")
	code, _, stderr = runZK(t, 10*time.Second, "serve", "--heartbeat", "0s")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--heartbeat must be at least 10ms")

	p := start(t, "serve", "--listen", "127.0.0.1:0", "--prefix", "/zklock-cmd-test")
	addr := httpAddrOf(t, p.stdout, "listening on http://")
	code, body := getJSON(t, "http://"+addr+"/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "connected", body["session"])

	path := lockPath(t)
	resp, err := http.Post("http://"+addr+"/v1/lock/acquire", "application/json", strings.NewReader(`{"path":"`+path+`"}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	lines := bufio.NewScanner(resp.Body)
	require.True(t, lines.Scan())
	require.Contains(t, lines.Text(), `"event":"granted"`)
	waitQueue(t, connect(t), path, 1)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.True(t, lines.Scan())
	for strings.Contains(lines.Text(), `"event":"heartbeat"`) { // one may come first on a slow machine
		require.True(t, lines.Scan())
	}
	require.Contains(t, lines.Text(), `"event":"released","id"`)
	require.Contains(t, lines.Text(), "the service is stopping")
	require.Equal(t, exitOK, p.wait(t, 20*time.Second), p.errText())
	waitQueue(t, connect(t), path, 0)
}

// TestExecHTTP: exec --value --http serves /leader: 200 in the leader, 503
// naming it in a follower, and 200 in the follower once it leads.
func TestExecHTTP(t *testing.T) {
	t.Parallel()
	code, _, stderr := runZK(t, 10*time.Second, "exec", "--http", "127.0.0.1:0", "/a", "--", "true")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "use it with --value")

	path := lockPath(t)
	c := connect(t)
	leader := start(t, "exec", "--value", "10.0.0.1:80", "--http", "127.0.0.1:0", path, "--", "sleep", "60")
	la := httpAddrOf(t, leader.stderr, "on http://")
	waitQueue(t, c, path, 1)
	eventually(t, "the leader's probe says 200", func() bool {
		code, _ := getJSON(t, "http://"+la+"/leader")
		return code == http.StatusOK
	})
	follower := start(t, "exec", "--value", "10.0.0.2:80", "--http", "127.0.0.1:0", path, "--", "sleep", "60")
	fa := httpAddrOf(t, follower.stderr, "on http://")
	waitQueue(t, c, path, 2)
	eventually(t, "the follower's probe names the leader", func() bool {
		code, body := getJSON(t, "http://"+fa+"/leader")
		ld, _ := body["leader"].(map[string]any)
		return code == http.StatusServiceUnavailable && ld != nil && ld["value"] == "10.0.0.1:80"
	})
	code, _ = getJSON(t, "http://"+fa+"/healthz")
	require.Equal(t, http.StatusOK, code)

	require.NoError(t, leader.cmd.Process.Signal(syscall.SIGTERM)) // passed on to sleep; exec releases
	leader.wait(t, 20*time.Second)
	eventually(t, "the follower's probe says 200", func() bool {
		code, body := getJSON(t, "http://"+fa+"/leader")
		ld, _ := body["leader"].(map[string]any)
		return code == http.StatusOK && ld != nil && ld["value"] == "10.0.0.2:80"
	})
}

// TestServeUnix: --unix makes the socket mode 600, as documented; a
// caller's holding names its process and user (SO_PEERCRED) in the owner
// record; the Host check is off (no web page reaches a Unix socket) while
// an Origin is still refused.
func TestServeUnix(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed (no curl in $PATH): this test drives it; make interop (scripts/install-interop.sh) installs it")
	}
	sock := filepath.Join(t.TempDir(), "zklock.sock")
	p := start(t, "serve", "--unix", sock, "--heartbeat", "100ms")
	httpAddrOf(t, p.stdout, "listening on unix:")
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the socket's mode")

	path := lockPath(t)
	holder := exec.Command("curl", "-sSN", "--unix-socket", sock, "-H", "Content-Type: application/json",
		"-d", `{"path":"`+path+`","owner":"nightly"}`, "http://anything.example/v1/lock/acquire")
	holder.Stdout = io.Discard
	require.NoError(t, holder.Start())
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	cs := waitQueue(t, connect(t), path, 1)
	require.Equal(t, fmt.Sprintf("nightly (pid %d uid %d)", holder.Process.Pid, os.Getuid()), cs[0].Owner.Name)

	out, err := exec.Command("curl", "-sS", "--unix-socket", sock, "-H", "Origin: http://evil.example",
		"http://localhost/v1/lock/status?path="+path).Output()
	require.NoError(t, err)
	require.Contains(t, string(out), "forbidden_origin")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, exitOK, p.wait(t, 20*time.Second), p.errText())
}

// TestServeRemovesEmptyPaths: a lock taken and released through 'zklock
// serve' at PREFIX/a/b leaves nothing below --prefix once the cleanup delay
// has passed (b, then a, both made by the service); the prefix stays.
func TestServeRemovesEmptyPaths(t *testing.T) {
	t.Parallel()
	prefix := strings.TrimSuffix(lockPath(t), "/lock")
	p := start(t, "serve", "--listen", "127.0.0.1:0", "--prefix", prefix)
	c := serveCaller{base: "http://" + httpAddrOf(t, p.stdout, "listening on http://")}
	path := prefix + "/a/b"
	lines := c.lines(t, `{"path":"`+path+`"}`)
	var granted struct{ Event, ID string }
	require.NoError(t, json.Unmarshal([]byte(nextLine(t, lines)), &granted))
	require.Equal(t, "granted", granted.Event)
	obs := connect(t)
	waitQueue(t, obs, path, 1)

	code, _ := c.call(t, "POST", "/v1/lock/release", `{"id":"`+granted.ID+`"}`)
	require.Equal(t, http.StatusOK, code)
	released := time.Now()
	eventually(t, prefix+"/a removed", func() bool {
		ok, _, err := obs.Conn().Exists(prefix + "/a")
		require.NoError(t, err)
		return !ok
	})
	t.Logf("the empty paths went %v after the release", time.Since(released).Round(time.Millisecond))
	ok, _, err := obs.Conn().Exists(prefix)
	require.NoError(t, err)
	require.True(t, ok, "the prefix itself was removed")
	children, _, err := obs.Conn().Children(prefix)
	require.NoError(t, err)
	require.Empty(t, children)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, exitOK, p.wait(t, 20*time.Second), p.errText())
	ok, _, err = obs.Conn().Exists(prefix)
	require.NoError(t, err)
	require.True(t, ok, "the prefix was removed as the service stopped")
}

// timedOutBound is how late after its timeout 'zklock serve' answers a wait
// that timed out, as docs/serve.md states it: within the cleanup timeout
// (1 s) when ZooKeeper stalls at the deadline, a round trip otherwise; with
// room for a loaded machine.
const timedOutBound = time.Second + 750*time.Millisecond

// TestServeTimedOutWaitAnswersWithinBound: a stream's wait and a lease's
// acquire whose 1 s timeout passes while another holds the lock are
// answered (failed or 408, code timeout) within timedOutBound of it. With
// ZooKeeper answering, the waiter's node is gone when the answer comes;
// with ZooKeeper stalled from 300 ms before the deadline, the answer does
// not wait for the delete, which removes the node once ZooKeeper answers.
func TestServeTimedOutWaitAnswersWithinBound(t *testing.T) {
	t.Parallel()
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	p := start(t, "serve", "--listen", "127.0.0.1:0", "--servers", proxy.Addr())
	c := serveCaller{base: "http://" + httpAddrOf(t, p.stdout, "listening on http://")}
	path := lockPath(t)
	holder := connect(t)
	m, err := holder.NewMutex(path)
	require.NoError(t, err)
	l, err := m.Acquire(context.Background())
	require.NoError(t, err)
	defer l.Release(context.Background())

	const timeout = time.Second
	for _, tc := range []struct {
		name         string
		lease, stall bool
	}{{"stream", false, false}, {"stream stalled", false, true}, {"lease", true, false}, {"lease stalled", true, true}} {
		wait := func() string { // sends the wait and returns its answer's code
			if !tc.lease {
				lines := c.lines(t, `{"path":"`+path+`","timeout":"1s"}`)
				var failed struct{ Event, Code string }
				require.NoError(t, json.Unmarshal([]byte(nextLine(t, lines)), &failed))
				require.Equal(t, "failed", failed.Event)
				return failed.Code
			}
			status, body := c.call(t, "POST", "/v1/lease/grant", `{"ttl":"3s"}`)
			require.Equal(t, http.StatusOK, status, "%v", body)
			lease := body["lease"].(string)
			defer c.call(t, "POST", "/v1/lease/revoke", `{"lease":"`+lease+`"}`)
			status, body = c.call(t, "POST", "/v1/lease/acquire", `{"lease":"`+lease+`","path":"`+path+`","timeout":"1s"}`)
			require.Equal(t, http.StatusRequestTimeout, status, "%v", body)
			return body["code"].(string)
		}
		start := time.Now()
		if tc.stall {
			stall := time.AfterFunc(timeout-300*time.Millisecond, proxy.Stall)
			defer stall.Stop()
		}
		require.Equal(t, "timeout", wait(), tc.name) // "timeout passed while others held the lock"
		took := time.Since(start)
		t.Logf("%s: answered %v after the timeout", tc.name, (took - timeout).Round(time.Millisecond))
		require.GreaterOrEqual(t, took, timeout, tc.name)
		require.Less(t, took, timeout+timedOutBound, tc.name)
		if !tc.stall {
			require.Len(t, contendersOf(t, holder, path), 1, "%s: the waiter's node outlived the answer", tc.name)
			continue
		}
		proxy.Resume()
		waitQueue(t, holder, path, 1)
	}
}
