package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serveCaller calls a running 'zklock serve' with one bearer token.
type serveCaller struct {
	base, token string
}

// call sends one request and returns the status and the decoded body.
func (c serveCaller) call(t *testing.T, method, route, body string) (int, map[string]any) {
	t.Helper()
	resp := c.send(t, context.Background(), method, route, body)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(raw, &v), "%s", raw)
	return resp.StatusCode, v
}

func (c serveCaller) send(t *testing.T, ctx context.Context, method, route, body string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+route, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

// lines opens an acquire and returns its stream's lines other than
// heartbeats, on a channel closed when the stream ends.
func (c serveCaller) lines(t *testing.T, body string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	resp := c.send(t, ctx, "POST", "/v1/lock/acquire", body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := make(chan string, 16)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if !strings.Contains(sc.Text(), `"event":"heartbeat"`) {
				out <- sc.Text()
			}
		}
	}()
	return out
}

func nextLine(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case l, ok := <-lines:
		require.True(t, ok, "the stream ended")
		return l
	case <-time.After(20 * time.Second):
		t.Fatal("no line on the stream within 20s")
		return ""
	}
}

func writeTokens(t *testing.T, file, text string) {
	t.Helper()
	tmp := file + ".new"
	require.NoError(t, os.WriteFile(tmp, []byte(text), 0o600))
	require.NoError(t, os.Rename(tmp, file))
}

// TestServeTokenReload: SIGHUP reloads --token-file. The removed token's
// caller loses its stream's lock ("lost", saying the token was removed),
// its lease ends at once (the next keep-alive and release answer 410
// lease_lost, saying so) and its lock goes at the lease's deadline, to
// another caller's waiting stream; an added token works at once; a file
// that does not parse keeps the tokens read before, and stderr says why.
func TestServeTokenReload(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, file, "alice a-token\nbob b-token\n")
	p := start(t, "serve", "--listen", "127.0.0.1:0", "--token-file", file, "--heartbeat", "200ms")
	base := "http://" + httpAddrOf(t, p.stdout, "listening on http://")
	alice, bob, carol := serveCaller{base, "a-token"}, serveCaller{base, "b-token"}, serveCaller{base, "c-token"}
	zk := connect(t)

	// alice: a lease holding one lock, a stream holding another.
	const ttl = 2 * time.Second
	leased, streamed := lockPath(t), lockPath(t)
	code, body := alice.call(t, "POST", "/v1/lease/grant", `{"ttl":"`+ttl.String()+`"}`)
	require.Equal(t, http.StatusOK, code, body)
	lease := body["lease"].(string)
	code, body = alice.call(t, "POST", "/v1/lease/acquire", `{"lease":"`+lease+`","path":"`+leased+`","try":true}`)
	require.Equal(t, http.StatusOK, code, body)
	id := body["id"].(string)
	aliceStream := alice.lines(t, `{"path":"`+streamed+`"}`)
	require.Contains(t, nextLine(t, aliceStream), `"event":"granted"`)
	// bob waits for both.
	bobLeased := bob.lines(t, `{"path":"`+leased+`"}`)
	bobStreamed := bob.lines(t, `{"path":"`+streamed+`"}`)
	waitQueue(t, zk, leased, 2)
	waitQueue(t, zk, streamed, 2)
	code, _ = carol.call(t, "GET", "/v1/lock/status?path="+leased, "")
	require.Equal(t, http.StatusUnauthorized, code, "carol is not in the file yet")

	// The reload: alice removed, carol added.
	code, body = alice.call(t, "POST", "/v1/lease/keepalive", `{"lease":"`+lease+`"}`)
	require.Equal(t, http.StatusOK, code, body)
	writeTokens(t, file, "bob b-token\ncarol c-token\n")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	reloaded := time.Now()
	eventually(t, "the reload said on stderr", func() bool {
		return strings.Contains(p.errText(), "reloaded --token-file "+file+": 2 tokens, 1 added, 1 removed")
	})

	lost := nextLine(t, aliceStream)
	require.Contains(t, lost, `"event":"lost"`)
	require.Contains(t, lost, "token was removed")
	granted := nextLine(t, bobStreamed)
	require.Contains(t, granted, `"event":"granted"`)
	require.Less(t, seqOf(t, lost), seqOf(t, granted), "bob granted the stream's lock before alice was told")

	code, body = alice.call(t, "POST", "/v1/lease/keepalive", `{"lease":"`+lease+`"}`)
	require.Equal(t, http.StatusGone, code, body)
	require.Equal(t, "lease_lost", body["code"])
	require.Contains(t, body["error"], "token was removed")
	code, body = alice.call(t, "POST", "/v1/lease/release", `{"lease":"`+lease+`","id":"`+id+`"}`)
	require.Equal(t, http.StatusGone, code, body)
	require.Equal(t, "lease_lost", body["code"])
	code, body = alice.call(t, "GET", "/v1/lock/status?path="+leased, "")
	require.Equal(t, http.StatusUnauthorized, code, body)
	require.Contains(t, body["error"], "removed")
	code, _ = carol.call(t, "GET", "/v1/lock/status?path="+leased, "")
	require.Equal(t, http.StatusOK, code, "carol's token works at once")

	// The leased lock goes at the lease's deadline (the last keep-alive's
	// arrival plus the TTL, before the reload plus the TTL), to bob.
	require.Contains(t, nextLine(t, bobLeased), `"event":"granted"`)
	after := time.Since(reloaded)
	require.Less(t, after, ttl+3*time.Second, "the lease's lock outlived its deadline")
	t.Logf("the leased lock granted to bob %v after the reload (ttl %v)", after, ttl)

	// A file that does not parse: the tokens read before hold.
	writeTokens(t, file, "bob b-token\ncarol c-token extra\n")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	eventually(t, "the failed reload said on stderr", func() bool {
		return strings.Contains(p.errText(), "not reloaded, the tokens read before still hold: --token-file "+file+" line 2")
	})
	for _, c := range []serveCaller{bob, carol} {
		code, _ = c.call(t, "GET", "/v1/lock/status?path="+leased, "")
		require.Equal(t, http.StatusOK, code)
	}
	require.NoError(t, os.Chmod(file, 0o644))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	eventually(t, "the refused mode said on stderr", func() bool {
		return strings.Contains(p.errText(), "not reloaded, the tokens read before still hold: --token-file "+file+": permissions 0644")
	})
	code, _ = carol.call(t, "GET", "/v1/lock/status?path="+leased, "")
	require.Equal(t, http.StatusOK, code)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, exitOK, p.wait(t, 20*time.Second), p.errText())
}

// seqOf is a stream line's seq: the order of lines across all streams.
func seqOf(t *testing.T, line string) int64 {
	t.Helper()
	var ev struct{ Seq int64 }
	require.NoError(t, json.Unmarshal([]byte(line), &ev))
	return ev.Seq
}

// TestServeStopWaitsForLeases: SIGTERM ends a lease at once (its next
// keep-alive answers 410 lease_lost, saying the service is stopping) but
// keeps its lock until the lease's deadline, which the caller may work up
// to: here 8s after the last keep-alive, past the 5s streams are given, and
// the process exits 0 only after. A second SIGTERM would stop at once.
func TestServeStopWaitsForLeases(t *testing.T) {
	t.Parallel()
	p := start(t, "serve", "--listen", "127.0.0.1:0", "--session-timeout", "24s")
	c := serveCaller{base: "http://" + httpAddrOf(t, p.stdout, "listening on http://")}
	zk := connect(t)
	path := lockPath(t)
	const ttl = 8 * time.Second
	code, body := c.call(t, "POST", "/v1/lease/grant", `{"ttl":"`+ttl.String()+`"}`)
	require.Equal(t, http.StatusOK, code, body)
	lease := body["lease"].(string)
	code, body = c.call(t, "POST", "/v1/lease/acquire", `{"lease":"`+lease+`","path":"`+path+`","try":true}`)
	require.Equal(t, http.StatusOK, code, body)
	node := body["node"].(string)
	sent := time.Now()
	code, body = c.call(t, "POST", "/v1/lease/keepalive", `{"lease":"`+lease+`"}`)
	require.Equal(t, http.StatusOK, code, body)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	eventually(t, "the lease's end said", func() bool {
		code, body = c.call(t, "POST", "/v1/lease/keepalive", `{"lease":"`+lease+`"}`)
		return code == http.StatusGone
	})
	require.Equal(t, "lease_lost", body["code"])
	require.Contains(t, body["error"], "the service is stopping")
	time.Sleep(time.Until(sent.Add(ttl - 1500*time.Millisecond)))
	cs := waitQueue(t, zk, path, 1)
	require.Equal(t, node, cs[0].Node, "the lease's lock went before its deadline")
	select {
	case <-p.done:
		t.Fatalf("exited before the lease's deadline: %s", p.errText())
	default:
	}
	require.Equal(t, exitOK, p.wait(t, 15*time.Second), p.errText())
	require.GreaterOrEqual(t, time.Since(sent), ttl, "exited before the lease's deadline")
	waitQueue(t, zk, path, 0)
}

// TestServeStopTwice: a second SIGINT or SIGTERM while the service waits
// for a lease's deadline stops it at once, saying what that costs.
func TestServeStopTwice(t *testing.T) {
	t.Parallel()
	p := start(t, "serve", "--listen", "127.0.0.1:0", "--session-timeout", "24s")
	c := serveCaller{base: "http://" + httpAddrOf(t, p.stdout, "listening on http://")}
	code, body := c.call(t, "POST", "/v1/lease/grant", `{"ttl":"8s"}`)
	require.Equal(t, http.StatusOK, code, body)
	code, body = c.call(t, "POST", "/v1/lease/acquire", `{"lease":"`+body["lease"].(string)+`","path":"`+lockPath(t)+`","try":true}`)
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	time.Sleep(300 * time.Millisecond)
	stopped := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, exitOK, p.wait(t, 15*time.Second), p.errText())
	require.Less(t, time.Since(stopped), 4*time.Second)
	require.Contains(t, p.errText(), "stopping at once")
}
