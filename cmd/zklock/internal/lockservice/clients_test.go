package lockservice_test

// The service driven by real clients in other languages: curl, and the
// Python and Node clients of clients/ (through testdata/pyclient.py and
// testdata/nodeclient.mjs).

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
	"github.com/zklock/zklock/zktest"
)

// killBound is the stated release time for a caller whose process ends: its
// connection closes, and the service releases within one ZooKeeper round
// trip. The test allows for a slow, shared machine.
const killBound = 5 * time.Second

// curl runs curl with args and returns its stdout, failing on its error.
func curl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("curl", append([]string{"-sS", "--max-time", "20"}, args...)...).Output()
	require.NoError(t, err, "curl %s", strings.Join(args, " "))
	return string(out)
}

func TestCurl(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed (no curl in $PATH): the curl-driven test needs it; make interop (scripts/install-interop.sh) installs it")
	}
	s := serve(t, lockservice.Config{Prefix: "/zklock-serve-test", Tokens: map[string]string{"s3cret": "curl"}, Heartbeat: time.Hour}) // the stream's lines counted below
	p := lockPath(t)
	auth, js := "Authorization: Bearer s3cret", "Content-Type: application/json"
	code := "%{http_code}\n"

	// Strangers, paths outside the prefix, bad bodies.
	require.Equal(t, "401", curl(t, "-o", "/dev/null", "-w", "%{http_code}", s.url+"/v1/lock/status?path="+p))
	out := curl(t, "-w", code, "-H", auth, "-H", js, "-d", `{"path":"/etc/passwd"}`, s.url+"/v1/lock/acquire")
	require.Contains(t, out, "outside this service's prefix")
	require.True(t, strings.HasSuffix(out, "403\n"), out)
	out = curl(t, "-w", code, "-H", auth, "-H", js, "-d", `{"path": "`+p+`", "kind": "mutex", "lease": 5}`, s.url+"/v1/lock/acquire")
	require.Contains(t, out, `unknown field \"lease\"`)
	require.True(t, strings.HasSuffix(out, "400\n"), out)
	out = curl(t, "-w", code, "-H", auth, "-H", js, "-d", `{"path": `, s.url+"/v1/lock/acquire")
	require.Contains(t, out, "bad JSON body")
	require.True(t, strings.HasSuffix(out, "400\n"), out)

	// Hold with curl -N (the stream), see it in the status, release by id.
	dir := t.TempDir()
	streamFile := filepath.Join(dir, "stream")
	f, err := os.Create(streamFile)
	require.NoError(t, err)
	holder := exec.Command("curl", "-sSN", "-H", auth, "-H", js, "-d", `{"path":"`+p+`","owner":"curl"}`, s.url+"/v1/lock/acquire")
	holder.Stdout = f
	require.NoError(t, holder.Start())
	f.Close()
	defer holder.Process.Kill()
	granted := waitLine(t, streamFile, 1)
	require.Equal(t, "granted", granted.Event)

	out = curl(t, "-H", auth, s.url+"/v1/lock/status?path="+p)
	checkSchemaJSON(t, "StatusResponse", []byte(out))
	require.Contains(t, out, `"owner":"curl (from 127.0.0.1:`)
	require.Contains(t, out, fmt.Sprintf(`"token":%d`, granted.Token))
	out = curl(t, "-w", code, "-H", auth, "-H", js, "-d", `{"path":"`+p+`","try":true}`, s.url+"/v1/lock/acquire")
	require.True(t, strings.HasSuffix(out, "409\n"), out)

	out = curl(t, "-H", auth, "-H", js, "-d", `{"id":"`+granted.ID+`"}`, s.url+"/v1/lock/release")
	require.JSONEq(t, `{"id":"`+granted.ID+`","released":true}`, out)
	require.Equal(t, "released", waitLine(t, streamFile, 2).Event)
	require.NoError(t, holder.Wait(), "curl ends when the stream does")
}

// waitLine waits until file has n lines and returns the n-th as an Event.
func waitLine(t *testing.T, file string, n int) lockservice.Event {
	t.Helper()
	var lines []string
	eventually(t, fmt.Sprintf("%d lines in %s", n, file), func() bool {
		b, _ := os.ReadFile(file)
		lines = strings.SplitAfter(string(b), "\n")
		return len(lines) > n || (len(lines) == n && strings.HasSuffix(lines[n-1], "\n"))
	})
	var ev lockservice.Event
	require.NoError(t, json.Unmarshal([]byte(lines[n-1]), &ev), lines[n-1])
	return ev
}

// lang is a client library in another language, run by its interpreter.
type lang struct {
	name, interpreter, how string
	cmd                    func(args ...string) *exec.Cmd
}

// repoRoot is the repository's root, from this package's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../../..")
	require.NoError(t, err)
	return root
}

// langs are the clients under clients/: Python's and Node's test drivers
// (testdata/pyclient.py, testdata/nodeclient.mjs) with the package on the
// interpreter's path.
func langs(t *testing.T) []lang {
	root := repoRoot(t)
	return []lang{
		{name: "python", interpreter: "python3", how: "install Python 3 (apt-get install python3)", cmd: func(args ...string) *exec.Cmd {
			c := exec.Command("python3", append([]string{"testdata/pyclient.py"}, args...)...)
			c.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "clients/python/src"))
			return c
		}},
		{name: "node", interpreter: "node", how: "install Node.js 18 or later (https://nodejs.org, or apt-get install nodejs)", cmd: func(args ...string) *exec.Cmd {
			c := exec.Command("node", append([]string{"testdata/nodeclient.mjs"}, args...)...)
			c.Env = append(os.Environ(), "ZKLOCK_NODE_CLIENT=file://"+filepath.Join(root, "clients/node/index.js"))
			return c
		}},
	}
}

// eachLang runs f for each client; an absent interpreter fails the test.
func eachLang(t *testing.T, f func(t *testing.T, l lang)) {
	for _, l := range langs(t) {
		t.Run(l.name, func(t *testing.T) {
			if _, err := exec.LookPath(l.interpreter); err != nil {
				t.Fatalf("%s is not installed (no %s in $PATH), so the %s client cannot be tested: %s (make test installs it)", l.interpreter, l.interpreter, l.name, l.how)
			}
			f(t, l)
		})
	}
}

// clientProc is one driver process holding or waiting.
type clientProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   string
	done  chan struct{}
}

func startClient(t *testing.T, l lang, s *served, path string) *clientProc {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(out)
	require.NoError(t, err)
	defer f.Close()
	cmd := l.cmd(s.url, s.token, path)
	cmd.Stdout, cmd.Stderr = f, os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &clientProc{cmd: cmd, stdin: stdin, out: out, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-c.done })
	return c
}

func (c *clientProc) lines() string { b, _ := os.ReadFile(c.out); return string(b) }

// driverEvent is a line a driver prints.
type driverEvent struct {
	Event, ID, Node, Reason, Code string
	Token, Seq                    int64
	OK                            bool
}

// line waits for the driver's n-th line.
func (c *clientProc) line(t *testing.T, n int) driverEvent {
	t.Helper()
	var lines []string
	eventually(t, fmt.Sprintf("%d lines from the client", n), func() bool {
		lines = strings.SplitAfter(c.lines(), "\n")
		return len(lines) > n || (len(lines) == n && strings.HasSuffix(lines[n-1], "\n"))
	})
	var ev driverEvent
	require.NoError(t, json.Unmarshal([]byte(lines[n-1]), &ev), lines[n-1])
	return ev
}

func (c *clientProc) release(t *testing.T) {
	t.Helper()
	_, err := io.WriteString(c.stdin, "release\n")
	require.NoError(t, err)
}

// exit waits for the driver's exit code.
func (c *clientProc) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the client did not exit within 20s")
	}
	return c.cmd.ProcessState.ExitCode()
}

// TestClientsOrderAndKill: three client processes on one path are granted
// in the order they queued, with growing tokens; one releases; one is
// killed (SIGKILL) while holding: the next is granted within killBound.
func TestClientsOrderAndKill(t *testing.T) {
	t.Parallel()
	eachLang(t, func(t *testing.T, l lang) {
		s := serve(t, lockservice.Config{Tokens: map[string]string{"client-token": l.name}, Heartbeat: 200 * time.Millisecond})
		p := lockPath(t)
		var cs []*clientProc
		for i := range 3 {
			cs = append(cs, startClient(t, l, s, p))
			waitQueue(t, s.client, p, i+1)
		}
		first := cs[0].line(t, 1)
		require.Equal(t, "granted", first.Event)
		require.NotContains(t, cs[1].lines()+cs[2].lines(), "granted")

		cs[0].release(t)
		require.Equal(t, 0, cs[0].exit(t), cs[0].lines())
		require.Equal(t, driverEvent{Event: "released", OK: true}, cs[0].line(t, 2))
		second := cs[1].line(t, 1)
		require.Equal(t, "granted", second.Event)
		require.Greater(t, second.Token, first.Token)
		require.NotContains(t, cs[2].lines(), "granted")

		require.NoError(t, cs[1].cmd.Process.Signal(syscall.SIGKILL))
		killed := time.Now()
		cs[1].exit(t)
		third := cs[2].line(t, 1)
		t.Logf("%s: the next granted %v after SIGKILL of the holder", l.name, time.Since(killed))
		require.Less(t, time.Since(killed), killBound, "the killed client's lock is released within the stated time")
		require.Equal(t, "granted", third.Event)
		require.Greater(t, third.Token, second.Token)
		require.Equal(t, third.Node, waitQueue(t, s.client, p, 1)[0].Node, "the killed client's node is gone")

		require.NoError(t, cs[2].stdin.Close()) // stdin closed: it keeps holding
		code, body := s.call(t, "POST", "/v1/lock/release", lockservice.ReleaseRequest{ID: third.ID})
		require.Equal(t, 200, code, string(body))
		require.Equal(t, 3, cs[2].exit(t), "released by someone else: the client says it lost the lock: %s", cs[2].lines())
	})
}

// TestClientsLossBeforeGrant: the holder's node is deleted while another
// client waits: the holder's client delivers the loss (held.lost set, the
// signal aborted), and the service wrote it before the waiter's grant.
func TestClientsLossBeforeGrant(t *testing.T) {
	t.Parallel()
	eachLang(t, func(t *testing.T, l lang) {
		s := serve(t, lockservice.Config{Heartbeat: 200 * time.Millisecond})
		p := lockPath(t)
		a := startClient(t, l, s, p)
		granted := a.line(t, 1)
		require.Equal(t, "granted", granted.Event)
		b := startClient(t, l, s, p)
		waitQueue(t, s.client, p, 2)

		raw := zktest.Connect(t, cluster.Addrs(), 4*time.Second)
		require.NoError(t, raw.Delete(granted.Node, -1))
		lost := a.line(t, 2)
		require.Equal(t, "lost", lost.Event)
		require.Contains(t, lost.Reason, "lock lost")
		require.Equal(t, 3, a.exit(t))
		next := b.line(t, 1)
		require.Equal(t, "granted", next.Event)
		require.Less(t, lost.Seq, next.Seq, "the loss was written before the next grant")
		require.Greater(t, next.Token, granted.Token)
		b.release(t)
		require.Equal(t, 0, b.exit(t), b.lines())
	})
}

// TestClientsHoldThroughIdleTimeouts: behind a proxy that cuts connections
// idle for 600ms, a client holds for 3s (the clients' own silence bound is
// 3 heartbeats, or 1s) and a second client waits as long: the heartbeats
// keep both, and the release and the grant go through.
func TestClientsHoldThroughIdleTimeouts(t *testing.T) {
	t.Parallel()
	eachLang(t, func(t *testing.T, l lang) {
		const idle = 600 * time.Millisecond
		s := serve(t, lockservice.Config{Heartbeat: 100 * time.Millisecond})
		px := throughProxy(t, s, idle)
		p := lockPath(t)
		a := startClient(t, l, px, p)
		first := a.line(t, 1)
		require.Equal(t, "granted", first.Event)
		b := startClient(t, l, px, p)
		waitQueue(t, s.client, p, 2)
		time.Sleep(5 * idle) // the hold itself: the time the proxy and the clients must bear
		require.Equal(t, first.Node, waitQueue(t, s.client, p, 2)[0].Node, "still held, still waiting")
		require.NotContains(t, a.lines(), "lost")
		a.release(t)
		require.Equal(t, 0, a.exit(t), a.lines())
		require.Equal(t, driverEvent{Event: "released", OK: true}, a.line(t, 2))
		require.Equal(t, "granted", b.line(t, 1).Event)
		b.release(t)
		require.Equal(t, 0, b.exit(t), b.lines())
	})
}

// TestClientsKilledWhileWaiting: a client killed (SIGKILL) in the middle of
// its wait leaves no queue node: its wait ends with the connection, and the
// client after it is next in line.
func TestClientsKilledWhileWaiting(t *testing.T) {
	t.Parallel()
	eachLang(t, func(t *testing.T, l lang) {
		s := serve(t, lockservice.Config{Heartbeat: 200 * time.Millisecond})
		p := lockPath(t)
		holder := startClient(t, l, s, p)
		first := holder.line(t, 1)
		require.Equal(t, "granted", first.Event)
		doomed := startClient(t, l, s, p)
		waitQueue(t, s.client, p, 2)
		next := startClient(t, l, s, p)
		waitQueue(t, s.client, p, 3)

		require.NoError(t, doomed.cmd.Process.Signal(syscall.SIGKILL))
		killed := time.Now()
		doomed.exit(t)
		cs := waitQueue(t, s.client, p, 2) // the killed waiter's node is gone
		require.Less(t, time.Since(killed), killBound)
		require.Equal(t, first.Node, cs[0].Node)

		holder.release(t)
		require.Equal(t, 0, holder.exit(t), holder.lines())
		granted := next.line(t, 1)
		require.Equal(t, "granted", granted.Event)
		require.Greater(t, granted.Token, first.Token)
		next.release(t)
		require.Equal(t, 0, next.exit(t), next.lines())
	})
}

// TestClientPackagesInstall: the clients install as the docs say, with
// nothing from a package index: `pip install ./clients/python` into a fresh
// virtual environment (its build backend is in the package, standard
// library only) and `npm install ./clients/node`; each then imports.
func TestClientPackagesInstall(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	eachLang(t, func(t *testing.T, l lang) {
		dir := t.TempDir()
		run := func(name string, args ...string) {
			t.Helper()
			cmd := exec.Command(name, args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "npm_config_offline=true", "npm_config_audit=false", "npm_config_fund=false", "npm_config_update_notifier=false")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
		}
		switch l.name {
		case "python":
			run("python3", "-m", "venv", filepath.Join(dir, "venv"))
			pip := filepath.Join(dir, "venv/bin/pip")
			if _, err := os.Stat(pip); err != nil {
				t.Fatalf("python3 -m venv made no pip (Debian: apt-get install python3-venv): %v", err)
			}
			run(pip, "install", "-q", filepath.Join(root, "clients/python"))
			run(filepath.Join(dir, "venv/bin/python"), "-c", "import zklock; zklock.Client('http://127.0.0.1:7070')")
			// As released: the sdist and the wheel its backend builds, the
			// wheel installed into another fresh environment.
			dist := filepath.Join(dir, "dist")
			require.NoError(t, os.MkdirAll(dist, 0o755))
			backend := "import sys, build_backend as b; print(b.build_sdist(sys.argv[1])); print(b.build_wheel(sys.argv[1]))"
			build := exec.Command("python3", "-c", backend, dist)
			build.Dir = filepath.Join(root, "clients/python")
			out, err := build.CombinedOutput()
			require.NoError(t, err, "%s", out)
			wheels, _ := filepath.Glob(filepath.Join(dist, "*.whl"))
			sdists, _ := filepath.Glob(filepath.Join(dist, "*.tar.gz"))
			require.Len(t, wheels, 1, "%s", out)
			require.Len(t, sdists, 1, "%s", out)
			run("python3", "-m", "venv", filepath.Join(dir, "venv2"))
			run(filepath.Join(dir, "venv2/bin/pip"), "install", "-q", wheels[0])
			run(filepath.Join(dir, "venv2/bin/python"), "-c", "import zklock; zklock.Client('http://127.0.0.1:7070')")
		case "node":
			if _, err := exec.LookPath("npm"); err != nil {
				t.Fatalf("node is installed but npm is not (Debian: apt-get install npm): %v", err)
			}
			run("npm", "install", "--prefix", dir, filepath.Join(root, "clients/node"))
			run("node", "--input-type=module", "-e", "import { Client } from 'zklock'; new Client();")
			// As released: the tarball npm pack makes, installed into an empty directory.
			packed := filepath.Join(dir, "packed")
			require.NoError(t, os.MkdirAll(packed, 0o755))
			run("npm", "pack", "--pack-destination", packed, filepath.Join(root, "clients/node"))
			tgz, _ := filepath.Glob(filepath.Join(packed, "*.tgz"))
			require.Len(t, tgz, 1)
			fresh := filepath.Join(dir, "fresh")
			run("npm", "install", "--prefix", fresh, tgz[0])
			check := exec.Command("node", "--input-type=module", "-e", "import { Client } from 'zklock'; new Client();")
			check.Dir = fresh
			out, err := check.CombinedOutput()
			require.NoError(t, err, "%s", out)
		}
	})
}

// TestClientsTour runs each client through every kind (testdata/pytour.py,
// testdata/nodetour.mjs): try, a timeout, read/write, a semaphore's
// permits, an election with its leader and watch, a bearer token, and the
// Unix socket.
func TestClientsTour(t *testing.T) {
	t.Parallel()
	s := serve(t, lockservice.Config{Tokens: map[string]string{"tour-token": "tour"}, Heartbeat: 200 * time.Millisecond})
	sock := filepath.Join(t.TempDir(), "zklock.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := &http.Server{Handler: s.svc.Handler()}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	scripts := map[string]string{"python": "testdata/pytour.py", "node": "testdata/nodetour.mjs"}
	eachLang(t, func(t *testing.T, l lang) {
		cmd := l.cmd()
		cmd.Args = append([]string{cmd.Args[0], scripts[l.name]}, s.url, s.token, sock, strings.TrimSuffix(lockPath(t), "/lock"))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "tour ok")
	})
}

// TestClientsLease: each client takes a lock with client.lease(ttl): it is
// held past the TTL (the client keeps the lease alive), released and
// revoked on request; and a lock of a lease deleted by someone else, or a
// lease the service forgot (it restarted), reaches the client as the loss.
func TestClientsLease(t *testing.T) {
	eachLang(t, func(t *testing.T, l lang) {
		t.Setenv("ZKLOCK_LEASE_TTL", "1")
		s := serveAsking(t, leaseSession, lockservice.Config{})
		p := lockPath(t)
		c := startClient(t, l, s, p)
		granted := c.line(t, 1)
		require.Equal(t, "granted", granted.Event)
		time.Sleep(2500 * time.Millisecond) // the duration measured: 2.5 TTLs, kept alive by the client
		require.Equal(t, granted.Node, waitQueue(t, s.client, p, 1)[0].Node)
		c.release(t)
		require.Equal(t, driverEvent{Event: "released", OK: true}, c.line(t, 2))
		require.Equal(t, 0, c.exit(t))
		waitQueue(t, s.client, p, 0)

		// Deleted by someone else: the next keep-alive says so.
		c = startClient(t, l, s, p)
		granted = c.line(t, 1)
		raw := zktest.Connect(t, cluster.Addrs(), 4*time.Second)
		require.NoError(t, raw.Delete(granted.Node, -1))
		lost := c.line(t, 2)
		require.Equal(t, "lost", lost.Event)
		require.Contains(t, lost.Reason, "lock lost")
		require.Equal(t, 3, c.exit(t))
	})
}

// TestClientsCutStreamSaysUnreachable: a holder whose stream is cut (a
// connection reset between it and the service) is told the lock is lost
// because the service is unreachable, in both languages (Node's client said
// only "aborted").
func TestClientsCutStreamSaysUnreachable(t *testing.T) {
	t.Parallel()
	eachLang(t, func(t *testing.T, l lang) {
		s := serve(t, lockservice.Config{Heartbeat: 100 * time.Millisecond})
		proxy := zktest.NewProxy(t, strings.TrimPrefix(s.url, "http://"))
		px := *s
		px.url = "http://" + proxy.Addr()
		p := lockPath(t)
		a := startClient(t, l, &px, p)
		require.Equal(t, "granted", a.line(t, 1).Event)
		proxy.Cut()
		lost := a.line(t, 2)
		require.Equal(t, "lost", lost.Event)
		require.Contains(t, lost.Reason, "unreachable", "the loss says why")
		require.Equal(t, 3, a.exit(t), a.lines())
	})
}
