package lockservice_test

// The service driven by real clients in other languages: curl, and a
// Python script using only the standard library (testdata/caller.py).

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
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
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (no curl in $PATH): the curl-driven test needs it")
	}
	s := serve(t, lockservice.Config{Prefix: "/zklock-serve-test", Tokens: map[string]string{"s3cret": "curl"}})
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

// pyCaller is one testdata/caller.py process holding or waiting.
type pyCaller struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   string
	done  chan struct{}
}

func startPython(t *testing.T, s *served, path string) *pyCaller {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(out)
	require.NoError(t, err)
	defer f.Close()
	cmd := exec.Command("python3", "testdata/caller.py", s.url, path, s.token)
	cmd.Stdout, cmd.Stderr = f, os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &pyCaller{cmd: cmd, stdin: stdin, out: out, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-c.done })
	return c
}

func (c *pyCaller) lines() string { b, _ := os.ReadFile(c.out); return string(b) }

// TestPythonCallers: three Python callers on one path are granted in the
// order they queued; one released by request, one killed (SIGKILL) while
// holding: the next is granted within killBound.
func TestPythonCallers(t *testing.T) {
	s := serve(t, lockservice.Config{Tokens: map[string]string{"py-token": "python"}})
	p := lockPath(t)
	var callers []*pyCaller
	for i := range 3 {
		callers = append(callers, startPython(t, s, p))
		waitQueue(t, s.client, p, i+1)
	}
	first := waitLine(t, callers[0].out, 1)
	require.Equal(t, "granted", first.Event)
	require.NotContains(t, callers[1].lines()+callers[2].lines(), "granted")

	_, err := io.WriteString(callers[0].stdin, "release\n")
	require.NoError(t, err)
	<-callers[0].done
	require.Equal(t, 0, callers[0].cmd.ProcessState.ExitCode(), callers[0].lines())
	require.Contains(t, callers[0].lines(), `"event": "released"`)
	second := waitLine(t, callers[1].out, 1)
	require.Equal(t, "granted", second.Event)
	require.Greater(t, second.Token, first.Token)
	require.NotContains(t, callers[2].lines(), "granted")

	require.NoError(t, callers[1].cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	<-callers[1].done
	third := waitLine(t, callers[2].out, 1)
	require.Less(t, time.Since(killed), killBound, "the killed caller's lock is released within the stated time")
	require.Equal(t, "granted", third.Event)
	require.Greater(t, third.Token, second.Token)
	cs := waitQueue(t, s.client, p, 1)
	require.Equal(t, third.Node, cs[0].Node, "the killed caller's node is gone")

	require.NoError(t, callers[2].stdin.Close()) // stdin closed: it keeps holding until released
	code, body := s.call(t, "POST", "/v1/lock/release", lockservice.ReleaseRequest{ID: third.ID})
	require.Equal(t, 200, code, string(body))
	<-callers[2].done
	require.Equal(t, 0, callers[2].cmd.ProcessState.ExitCode())
}

// TestPythonCallerKilledWhileWaiting: a caller killed (SIGKILL) in the
// middle of its acquire request, while it waits behind a holder, leaves no
// queue node: its wait ends with the connection, and the caller after it is
// next in line.
func TestPythonCallerKilledWhileWaiting(t *testing.T) {
	s := serve(t, lockservice.Config{Tokens: map[string]string{"py-token": "python"}})
	p := lockPath(t)
	holder := startPython(t, s, p)
	waitQueue(t, s.client, p, 1)
	first := waitLine(t, holder.out, 1)
	require.Equal(t, "granted", first.Event)
	doomed := startPython(t, s, p)
	waitQueue(t, s.client, p, 2)
	next := startPython(t, s, p)
	waitQueue(t, s.client, p, 3)

	require.NoError(t, doomed.cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	<-doomed.done
	cs := waitQueue(t, s.client, p, 2) // the killed waiter's node is gone
	require.Less(t, time.Since(killed), killBound)
	require.Equal(t, first.Node, cs[0].Node)

	_, err := io.WriteString(holder.stdin, "release\n")
	require.NoError(t, err)
	<-holder.done
	granted := waitLine(t, next.out, 1)
	require.Equal(t, "granted", granted.Event)
	require.Greater(t, granted.Token, first.Token)
	require.NoError(t, next.stdin.Close())
	code, body := s.call(t, "POST", "/v1/lock/release", lockservice.ReleaseRequest{ID: granted.ID})
	require.Equal(t, 200, code, string(body))
	<-next.done
}
