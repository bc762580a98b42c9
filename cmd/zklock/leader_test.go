package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// zklock leader: nobody (exit 1), then a campaigner with its value (exit 0),
// as a line and as JSON.
func TestLeader(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	code, out, stderr := runZK(t, 20*time.Second, "leader", path)
	require.Equal(t, exitFailure, code, stderr)
	require.Equal(t, "nobody leads "+path+"\n", out)

	e, err := connect(t).NewElection(path)
	require.NoError(t, err)
	ld, err := e.Campaign(context.Background(), "10.0.0.7:8080")
	require.NoError(t, err)
	tok, err := ld.Lease().Token(context.Background())
	require.NoError(t, err)

	code, out, stderr = runZK(t, 20*time.Second, "leader", path)
	require.Equal(t, exitOK, code, stderr)
	host, _ := os.Hostname()
	require.Contains(t, out, `leader of `+path+`: value "10.0.0.7:8080" host `+host)
	require.Contains(t, out, "lock-0000000000")

	code, out, stderr = runZK(t, 20*time.Second, "leader", "--json", path)
	require.Equal(t, exitOK, code, stderr)
	var got leaderJSON
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Equal(t, leaderJSON{Leader: true, Node: ld.Lease().Node(), Value: "10.0.0.7:8080", Host: host, PID: os.Getpid(), Token: tok}, got)
}

// zklock leader --watch prints every change: nobody, a leader, its new
// value, nobody again.
func TestLeaderWatch(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	p := start(t, "leader", "--watch", path)
	lines := followLines(t, p)
	require.Equal(t, "nobody leads "+path, recv(t, lines))
	e, err := connect(t).NewElection(path)
	require.NoError(t, err)
	ld, err := e.Campaign(context.Background(), "v1")
	require.NoError(t, err)
	require.Contains(t, recv(t, lines), `value "v1"`)
	require.NoError(t, ld.Proclaim(context.Background(), "v2"))
	require.Contains(t, recv(t, lines), `value "v2"`)
	require.NoError(t, ld.Resign(context.Background()))
	require.Equal(t, "nobody leads "+path, recv(t, lines))
}

// followLines sends p's stdout lines as they are written.
func followLines(t *testing.T, p *proc) <-chan string {
	t.Helper()
	out := make(chan string, 16)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		var seen int
		for {
			sc := bufio.NewScanner(strings.NewReader(p.outText()))
			n := 0
			for sc.Scan() {
				if n++; n > seen {
					out <- sc.Text()
					seen = n
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond): // stdout is a file: no event to wait for
			}
		}
	}()
	return out
}

// zklock break --ask: a 'zklock exec --revocable' holder stops its command
// and releases; status shows the request while it is pending on a holder
// that does not listen.
func TestBreakAskRevocableExec(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	file := filepath.Join(t.TempDir(), "events")
	p := start(t, "exec", "--revocable", path, "--", "sh", "-c",
		`trap "echo TERM >> $0; exit 3" TERM; echo started >> $0; while :; do sleep 0.1; done`, file)
	waitQueue(t, c, path, 1)
	waitFile(t, file, "started")
	code, out, stderr := runZK(t, 20*time.Second, "break", "--ask", path)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, out, "asked the holder of "+path+" to release")
	require.Equal(t, 3, p.wait(t, 10*time.Second), "the command's own status")
	waitFile(t, file, "TERM")
	require.Contains(t, p.errText(), "asked to release the lock on "+path)
	waitQueue(t, c, path, 0)

	other := start(t, "exec", path, "--", "sleep", "30") // not revocable
	waitQueue(t, c, path, 1)
	code, _, stderr = runZK(t, 20*time.Second, "break", "--ask", path)
	require.Equal(t, exitOK, code, stderr)
	code, out, stderr = runZK(t, 20*time.Second, "status", path)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, out, "HOLDER (asked to release)")
	select {
	case <-other.done:
		t.Fatal("a holder that does not listen must go on")
	default:
	}
}

func recv(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case l := <-lines:
		return l
	case <-time.After(15 * time.Second):
		t.Fatal("no line printed")
		return ""
	}
}

// exec --value campaigns and publishes: zklock leader names the value.
func TestExecValueIsTheLeadersValue(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	start(t, "exec", "--value", "cron@10.0.0.9", path, "--", "sleep", "30")
	waitQueue(t, c, path, 1)
	code, out, stderr := runZK(t, 20*time.Second, "leader", path)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, out, `value "cron@10.0.0.9"`)
	require.Contains(t, out, "owner sleep")
	code, _, stderr = runZK(t, 20*time.Second, "exec", "--value", "x", "--try", path, "--", "true")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--value campaigns for one path")
}
