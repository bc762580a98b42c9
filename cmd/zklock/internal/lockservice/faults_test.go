package lockservice_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
)

// TestSemaphorePermits: limit is the semaphore's N, permits the k taken at
// once, as zklock exec's --semaphore N --permits k.
func TestSemaphorePermits(t *testing.T) {
	t.Parallel()
	s := serve(t, lockservice.Config{})
	p := lockPath(t)
	two := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Kind: "semaphore", Limit: 3, Permits: 2})
	require.Equal(t, "granted", two.next(t).Event)
	code, body := s.call(t, "POST", "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Kind: "semaphore", Limit: 3, Permits: 2, Try: true})
	require.Equal(t, http.StatusConflict, code, "2 of 3 are taken: 2 more are not free: %s", body)
	one := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Kind: "semaphore", Limit: 3, Try: true})
	require.Equal(t, http.StatusOK, one.status(t))
	require.Equal(t, "granted", one.next(t).Event, "permits defaults to 1, and 1 of 3 is free")
	code, body = s.call(t, "POST", "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Kind: "mutex", Permits: 2})
	require.Equal(t, http.StatusBadRequest, code, string(body))
	require.Contains(t, string(body), `limit and permits are for kind \"semaphore\"`)
}

// TestWatchesCountedAndOwners: a watch counts against --max-holds; the
// owner record names the caller (its name, and the host and pid it gives,
// else its address); /healthz answers {ok, session}.
func TestWatchesCountedAndOwners(t *testing.T) {
	t.Parallel()
	s := serve(t, lockservice.Config{MaxHolds: 1})
	p := lockPath(t)
	watch := s.do(t, "GET", "/v1/election/watch?path="+p, nil)
	require.Equal(t, http.StatusOK, watch.StatusCode)
	code, body := s.call(t, "GET", "/v1/election/watch?path="+p, nil)
	require.Equal(t, http.StatusTooManyRequests, code, "a second watch: %s", body)
	checkSchemaJSON(t, "ErrorResponse", body)
	code, body = s.call(t, "POST", "/v1/lock/acquire", lockservice.AcquireRequest{Path: p})
	require.Equal(t, http.StatusTooManyRequests, code, "an acquire beside the watch: %s", body)
	watch.Body.Close() // the watch ends: the caller may hold again
	var held *stream
	eventually(t, "the watch's slot freed", func() bool {
		st := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Owner: "report-job", Host: "web-3", PID: 4242})
		if st.status(t) == http.StatusOK {
			held = st
			return true
		}
		return false
	})
	require.Equal(t, "granted", held.next(t).Event)
	cs := waitQueue(t, s.client, p, 1)
	require.Equal(t, "report-job (host web-3 pid 4242)", cs[0].Owner.Name)
	held.leave(t)
	waitQueue(t, s.client, p, 0)

	anon := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p})
	require.Equal(t, "granted", anon.next(t).Event)
	cs = waitQueue(t, s.client, p, 1)
	require.True(t, strings.HasPrefix(cs[0].Owner.Name, "local (from 127.0.0.1:"), cs[0].Owner.Name)

	code, body = s.call(t, "GET", "/healthz", nil)
	require.Equal(t, http.StatusOK, code)
	checkSchemaJSON(t, "HealthResponse", body)
	var h lockservice.HealthResponse
	require.NoError(t, json.Unmarshal(body, &h))
	require.Equal(t, lockservice.HealthResponse{OK: true, Session: "connected"}, h)
}

// TestZeroTimeout: "timeout": "0s" is refused (it once waited for ever);
// with try it is a try, as the clients send for a timeout of 0.
func TestZeroTimeout(t *testing.T) {
	t.Parallel()
	s := serve(t, lockservice.Config{})
	p := lockPath(t)
	for _, route := range []string{"/v1/lock/acquire", "/v1/election/campaign"} {
		code, body := s.call(t, "POST", route, map[string]any{"path": p, "timeout": "0s"})
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", route, body)
		require.Contains(t, string(body), `send \"try\": true instead`)
	}
	held := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Timeout: "0s", Try: true})
	require.Equal(t, http.StatusOK, held.status(t))
	require.Equal(t, "granted", held.next(t).Event)
	code, body := s.call(t, "POST", "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Timeout: "0ms", Try: true})
	require.Equal(t, http.StatusConflict, code, string(body))
}
