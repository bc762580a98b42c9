package lockservice_test

import (
	"bufio"

	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
	"github.com/zklock/zklock/zktest"
)

// TestLostLockReportedBeforeTheNextGrant deletes the holder's node with a
// raw connection: the holder's stream says "lost" before the waiter's says
// "granted" (Seq orders the service's writes).
func TestLostLockReportedBeforeTheNextGrant(t *testing.T) {
	t.Parallel()
	s := serve(t, lockservice.Config{})
	p := lockPath(t)
	a := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p})
	require.Equal(t, http.StatusOK, a.status(t))
	granted := a.next(t)
	require.Equal(t, "granted", granted.Event)
	checkSchema(t, "Event", granted)
	b := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p})
	cs := waitQueue(t, s.client, p, 2) // b waits behind a
	require.Equal(t, granted.Node, cs[0].Node)
	require.Equal(t, granted.Token, cs[0].Token)

	raw := zktest.Connect(t, cluster.Addrs(), 4*time.Second)
	require.NoError(t, raw.Delete(granted.Node, -1))

	lost := a.next(t)
	require.Equal(t, "lost", lost.Event)
	require.Contains(t, lost.Reason, "lock lost")
	bGranted := b.next(t) // the grant comes after the loss was written, whichever we read first
	require.Equal(t, "granted", bGranted.Event)
	require.Less(t, lost.Seq, bGranted.Seq, "the loss was written before the next grant")
	require.Greater(t, bGranted.Token, granted.Token)
	a.ended(t) // a's stream ends after the loss

	// Its release, after the stream ended, says it was lost.
	code, body := s.call(t, "POST", "/v1/lock/release", lockservice.ReleaseRequest{ID: granted.ID})
	require.Equal(t, http.StatusConflict, code, string(body))
	checkSchemaJSON(t, "ErrorResponse", body)
	require.Contains(t, string(body), `"code":"lost"`)
}

// TestReleaseAndOrder: callers of one path are granted in the order they
// queued; a release by id ends the stream with "released"; a caller that
// closes its request releases.
func TestReleaseAndOrder(t *testing.T) {
	t.Parallel()
	s := serve(t, lockservice.Config{})
	p := lockPath(t)
	var st []*stream
	for i := range 3 {
		st = append(st, s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Owner: "w" + string(rune('0'+i))}))
		waitQueue(t, s.client, p, i+1) // queued in this order
	}
	first := st[0].next(t)
	code, body := s.call(t, "POST", "/v1/lock/release", lockservice.ReleaseRequest{ID: first.ID})
	require.Equal(t, http.StatusOK, code, string(body))
	checkSchemaJSON(t, "ReleaseResponse", body)
	require.Equal(t, "released", st[0].next(t).Event)
	second := st[1].next(t)
	require.Equal(t, "granted", second.Event)
	require.Greater(t, second.Token, first.Token)

	st[1].leave(t) // the caller leaves: its lock is released
	third := st[2].next(t)
	require.Equal(t, "granted", third.Event)
	require.Greater(t, third.Token, second.Token)
	waitQueue(t, s.client, p, 1)

	code, body = s.call(t, "POST", "/v1/lock/release", lockservice.ReleaseRequest{ID: second.ID})
	require.Equal(t, http.StatusNotFound, code, string(body))
	checkSchemaJSON(t, "ErrorResponse", body)
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	s := serve(t, lockservice.Config{Prefix: "/zklock-serve-test", Tokens: map[string]string{"s3cret": "app"}, MaxHolds: 1})
	p := lockPath(t)
	for _, tc := range []struct {
		name, route string
		body        any
		code        int
		msg         string
	}{
		{"bad JSON", "/v1/lock/acquire", `{"path":`, 400, "bad JSON body"},
		{"unknown field", "/v1/lock/acquire", `{"path":"` + p + `","nope":1}`, 400, `unknown field "nope"`},
		{"trailing data", "/v1/lock/acquire", `{"path":"` + p + `"} {}`, 400, "data after the JSON object"},
		{"bad kind", "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Kind: "spin"}, 400, `unknown kind "spin"`},
		{"bad timeout", "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Timeout: "soon"}, 400, `timeout "soon"`},
		{"semaphore without limit", "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Kind: "semaphore"}, 400, "needs limit"},
		{"permits over the limit", "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Kind: "semaphore", Limit: 2, Permits: 3}, 400, "not between 1 and the limit 2"},
		{"relative path", "/v1/lock/acquire", lockservice.AcquireRequest{Path: "locks/x"}, 400, "invalid lock path"},
		{"outside the prefix", "/v1/lock/acquire", lockservice.AcquireRequest{Path: "/elsewhere/x"}, 403, "outside this service's prefix"},
		{"status outside the prefix", "/v1/lock/status?path=/elsewhere", nil, 403, "outside"},
		{"status without path", "/v1/lock/status", nil, 400, "missing the path"},
		{"no such route", "/v1/nope", nil, 404, "no such route"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := "GET"
			if tc.body != nil {
				method = "POST"
			}
			code, body := s.call(t, method, tc.route, tc.body)
			require.Equal(t, tc.code, code, string(body))
			checkSchemaJSON(t, "ErrorResponse", body)
			var e lockservice.ErrorResponse
			require.NoError(t, json.Unmarshal(body, &e))
			require.Contains(t, e.Error, tc.msg)
		})
	}
	// A stranger without the token is refused; the probe needs none.
	stranger := *s
	stranger.token = ""
	code, body := stranger.call(t, "GET", "/v1/lock/status?path="+p, nil)
	require.Equal(t, http.StatusUnauthorized, code, string(body))
	stranger.token = "guess"
	code, _ = stranger.call(t, "POST", "/v1/lock/acquire", lockservice.AcquireRequest{Path: p})
	require.Equal(t, http.StatusUnauthorized, code)
	code, body = stranger.call(t, "GET", "/healthz", nil)
	require.Equal(t, http.StatusOK, code)
	checkSchemaJSON(t, "HealthResponse", body)

	// MaxHolds 1: a second acquire of the same caller is refused; try on a held path is 409.
	held := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p})
	require.Equal(t, "granted", held.next(t).Event)
	code, body = s.call(t, "POST", "/v1/lock/acquire", lockservice.AcquireRequest{Path: p + "2"})
	require.Equal(t, http.StatusTooManyRequests, code, string(body))
	s2 := serve(t, lockservice.Config{})
	code, body = s2.call(t, "POST", "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Try: true})
	require.Equal(t, http.StatusConflict, code, string(body))
	require.Contains(t, string(body), `"code":"locked"`)
	code, body = s2.call(t, "POST", "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Timeout: "100ms"})
	require.Equal(t, http.StatusOK, code, string(body)) // accepted at once: the stream says how the wait ended
	var failed lockservice.Event
	require.NoError(t, json.Unmarshal(body, &failed))
	checkSchemaJSON(t, "Event", body)
	require.Equal(t, "failed", failed.Event)
	require.Equal(t, "timeout", failed.Code)
	waitQueue(t, s.client, p, 1) // the timed-out waiter left no node
}

// TestKinds: readers share, a writer waits for them; a semaphore of 2.
func TestKinds(t *testing.T) {
	t.Parallel()
	s := serve(t, lockservice.Config{})
	p := lockPath(t)
	r1 := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Kind: "read"})
	r2 := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Kind: "read"})
	require.Equal(t, "granted", r1.next(t).Event)
	require.Equal(t, "granted", r2.next(t).Event)
	w := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Kind: "write"})
	waitQueue(t, s.client, p, 3)
	r1.leave(t)
	r2.leave(t)
	require.Equal(t, "granted", w.next(t).Event)

	sp := lockPath(t)
	a := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: sp, Kind: "semaphore", Limit: 2})
	b := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: sp, Kind: "semaphore", Limit: 2})
	require.Equal(t, "granted", a.next(t).Event)
	require.Equal(t, "granted", b.next(t).Event)
	code, body := s.call(t, "POST", "/v1/lock/acquire", lockservice.AcquireRequest{Path: sp, Kind: "semaphore", Limit: 2, Try: true})
	require.Equal(t, http.StatusConflict, code, string(body))
	code, body = s.call(t, "GET", "/v1/lock/status?path="+sp, nil)
	require.Equal(t, http.StatusOK, code, string(body))
	checkSchemaJSON(t, "StatusResponse", body)
	var status lockservice.StatusResponse
	require.NoError(t, json.Unmarshal(body, &status))
	require.Len(t, status.Contenders, 2)
	require.True(t, status.Contenders[0].Holder && status.Contenders[1].Holder)
}

// TestElection: campaign, read the leader, watch it change.
func TestElection(t *testing.T) {
	t.Parallel()
	s := serve(t, lockservice.Config{})
	p := lockPath(t)
	code, body := s.call(t, "GET", "/v1/election/leader?path="+p, nil)
	require.Equal(t, http.StatusNotFound, code, string(body))
	require.Contains(t, string(body), "no_leader")

	resp := s.do(t, "GET", "/v1/election/watch?path="+p, nil)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := sseEvents(resp)
	require.Equal(t, "", nextLeader(t, events).Node) // nobody leads yet

	a := s.open(t, "/v1/election/campaign", lockservice.CampaignRequest{Path: p, Value: "10.0.0.1:80"})
	elected := a.next(t)
	require.Equal(t, "elected", elected.Event)
	b := s.open(t, "/v1/election/campaign", lockservice.CampaignRequest{Path: p, Value: "10.0.0.2:80"})
	waitQueue(t, s.client, p, 2)
	ld := nextLeader(t, events)
	require.Equal(t, "10.0.0.1:80", ld.Value)
	require.Equal(t, elected.Token, ld.Token)
	code, body = s.call(t, "GET", "/v1/election/leader?path="+p, nil)
	require.Equal(t, http.StatusOK, code, string(body))
	checkSchemaJSON(t, "LeaderResponse", body)
	require.Contains(t, string(body), "10.0.0.1:80")

	a.leave(t) // resigns
	require.Equal(t, "elected", b.next(t).Event)
	require.Equal(t, "10.0.0.2:80", nextLeader(t, events).Value)
}

func sseEvents(resp *http.Response) <-chan string {
	out := make(chan string, 8)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				out <- data
			}
		}
	}()
	return out
}

func nextLeader(t *testing.T, events <-chan string) lockservice.LeaderResponse {
	t.Helper()
	select {
	case data, ok := <-events:
		require.True(t, ok, "the watch ended")
		checkSchemaJSON(t, "LeaderResponse", []byte(data))
		var l lockservice.LeaderResponse
		require.NoError(t, json.Unmarshal([]byte(data), &l))
		return l
	case <-time.After(20 * time.Second):
		t.Fatal("no leader event within 20s")
	}
	return lockservice.LeaderResponse{}
}

// TestServiceCutOff: the service's session is cut off (the proxy stalls):
// the holder's stream says "lost" within the loss bound, 0.8 of the
// session timeout, and /healthz answers 503 from then on (locks
// "presumed_lost" while the session may still say connected), until
// ZooKeeper answers again.
func TestServiceCutOff(t *testing.T) {
	t.Parallel()
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	s := serve(t, lockservice.Config{}, proxy.Addr())
	p := lockPath(t)
	a := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p})
	require.Equal(t, "granted", a.next(t).Event)
	proxy.Stall()
	stalled := time.Now()
	defer proxy.Resume()
	lost := a.next(t)
	require.Equal(t, "lost", lost.Event)
	require.Less(t, time.Since(stalled), 4*time.Second, "within 0.8 T (T = 4s) of the last contact")
	code, body := s.call(t, "GET", "/healthz", nil)
	require.Equal(t, http.StatusServiceUnavailable, code, "healthz right after the loss: %s", body)
	checkSchemaJSON(t, "HealthResponse", body)
	var h lockservice.HealthResponse
	require.NoError(t, json.Unmarshal(body, &h))
	require.False(t, h.OK)
	if h.Session == "connected" {
		require.Equal(t, "presumed_lost", h.Locks, "503 while the session still says connected: %s", body)
	}
	proxy.Resume()
	eventually(t, "healthz 200 once ZooKeeper answers again", func() bool {
		code, _ := s.call(t, "GET", "/healthz", nil)
		return code == http.StatusOK
	})
}

// TestRequestEdges: a known route with the wrong method answers 405 and
// names the method it takes; a body that is not JSON answers 415 with a
// code of its own; the bearer scheme is case-insensitive (RFC 7235); a
// page with Origin null (sandboxed, or a local file) is refused without
// advice to let every such page in.
func TestRequestEdges(t *testing.T) {
	t.Parallel()
	s := serve(t, lockservice.Config{Tokens: map[string]string{"s3cret": "alice"}})
	send := func(method, route, ctype, auth, origin, body string) (*http.Response, lockservice.ErrorResponse) {
		req, err := http.NewRequest(method, s.url+route, strings.NewReader(body))
		require.NoError(t, err)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		req.Header.Set("Authorization", auth)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var e lockservice.ErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp, e
	}
	resp, e := send("GET", "/v1/lock/acquire", "", "Bearer s3cret", "", "")
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, "method_not_allowed", e.Code)
	require.Equal(t, "POST", resp.Header.Get("Allow"))
	resp, e = send("POST", "/v1/lock/status", "text/plain", "Bearer s3cret", "", "x")
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, e.Error)
	resp, e = send("POST", "/v1/lock/release", "text/plain", "Bearer s3cret", "", "{}")
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, e.Error)
	require.Equal(t, "unsupported_media_type", e.Code)
	resp, e = send("GET", "/v1/lock/status?path="+lockPath(t), "", "bearer s3cret", "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "a lower-case scheme: %s", e.Error)
	resp, e = send("GET", "/v1/lock/status?path="+lockPath(t), "", "bearer wrong", "", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, e = send("GET", "/v1/lock/status?path="+lockPath(t), "", "Bearer s3cret", "null", "")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.NotContains(t, e.Error, "--allow-origin", "no advice to let every sandboxed page in")
}
