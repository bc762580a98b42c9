package lockservice_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
)

// TestLostAtGrantIsNotGranted: a lock the service's client must presume
// lost as it is granted (the library returns its lease with Done closed and
// deletes the node) is answered as not held, a lease's acquire with 503
// unreachable and a stream with failed, never as granted: the caller would
// work while the next waiter holds the lock. Nothing is left behind.
func TestLostAtGrantIsNotGranted(t *testing.T) {
	t.Parallel()
	s := serve(t, lockservice.Config{})
	lockservice.StageLostAtGrant(s.svc)
	id := s.grantLease(t, "1s")
	p := lockPath(t)

	code, body := s.call(t, "POST", "/v1/lease/acquire", lockservice.LeaseAcquireRequest{Lease: id, Path: p, Timeout: "5s"})
	require.Equal(t, http.StatusServiceUnavailable, code, string(body))
	checkSchemaJSON(t, "ErrorResponse", body)
	require.Contains(t, string(body), `"code":"unreachable"`)
	require.Contains(t, string(body), "lost as it was granted")
	waitQueue(t, s.client, p, 0)

	st := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p})
	require.Equal(t, http.StatusOK, st.status(t))
	ev := st.next(t)
	require.Equal(t, "failed", ev.Event)
	require.Equal(t, "unreachable", ev.Code)
	require.Contains(t, ev.Reason, "lost as it was granted")
	checkSchema(t, "Event", ev)
	st.ended(t)
	waitQueue(t, s.client, p, 0)
}
