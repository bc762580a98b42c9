package lockservice_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
	"github.com/zklock/zklock/zktest"
)

// A service whose client asks for a longer session timeout than ZooKeeper
// grants bounds a lease's TTL by the granted one: a third of 4.5 s, not of
// the 12 s asked (whose third, 4 s, could outlive the session if the
// service were cut off). A TTL within the granted bound is granted, holds a
// lock and is kept alive.
func TestLeaseTTLFromGrantedTimeout(t *testing.T) {
	t.Parallel()
	const granted = 4500 * time.Millisecond
	zc := zktest.Start(t, zktest.WithMaxSessionTimeout(granted))
	s := serveAsking(t, 12*time.Second, lockservice.Config{}, zc.Addrs()...)
	require.Equal(t, granted, s.client.SessionTimeout())
	require.Equal(t, granted/3, s.svc.MaxLeaseTTL())

	for _, ttl := range []string{"2s", "1501ms", "4s"} {
		code, body := s.call(t, "POST", "/v1/lease/grant", lockservice.LeaseGrantRequest{TTL: ttl})
		require.Equal(t, http.StatusBadRequest, code, "ttl %s: %s", ttl, body)
		checkSchemaJSON(t, "ErrorResponse", body)
		require.Contains(t, string(body), `"code":"bad_ttl"`)
		require.Contains(t, string(body), "between 1s and 1.5s (a third of the session timeout 4.5s ZooKeeper granted the service")
	}
	id := s.grantLease(t, "1500ms")
	held := s.leaseLock(t, lockservice.LeaseAcquireRequest{Lease: id, Path: lockPath(t), Timeout: "10s"})
	code, body := s.call(t, "POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: id})
	require.Equal(t, http.StatusOK, code, string(body))
	require.Contains(t, string(body), held.ID)
	require.NotContains(t, string(body), `"lost"`)
}

// Stopping waits for the longest TTL a live lease has, even one above the
// bound now: granted before a reconnection's smaller grant lowered it, its
// caller may work until its deadline, and the service's stop must not end
// its locks before then.
func TestMaxLeaseTTLCoversLiveLeases(t *testing.T) {
	t.Parallel()
	s := serve(t, lockservice.Config{})
	bound := s.client.SessionTimeout() / 3
	require.Equal(t, bound, s.svc.MaxLeaseTTL())
	id := s.grantLease(t, "1s")
	lockservice.StretchLease(s.svc, id, 3*bound)
	require.Equal(t, 3*bound, s.svc.MaxLeaseTTL())
	code, body := s.call(t, "POST", "/v1/lease/revoke", lockservice.LeaseRequest{Lease: id})
	require.Equal(t, http.StatusOK, code, string(body))
	require.Equal(t, bound, s.svc.MaxLeaseTTL(), "an ended lease no longer counts")
}
