package lockservice_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
)

// A holding has one owner: a lease's holding is released only through its
// lease, a stream's only through the stream routes; the other route
// answers 4xx and changes nothing. Before, /v1/lock/release with a lease's
// holding id answered 200 and deleted the node while the lease still
// listed the holding as held: the next caller was granted the lock while
// the lease's caller, following the rule (hold until a keep-alive says
// lost), went on working, and the lease's own release answered 200.
func TestHoldingIsReleasedOnlyByItsOwner(t *testing.T) {
	t.Parallel()
	s := serveAsking(t, leaseSession, lockservice.Config{})
	p := lockPath(t)
	id := s.grantLease(t, "2s")
	held := s.leaseLock(t, lockservice.LeaseAcquireRequest{Lease: id, Path: p, Try: true})

	// The stream route refuses the lease's holding, and nothing changes.
	require.Equal(t, "lease_holding", s.errorCode(t, http.StatusConflict, "POST", "/v1/lock/release", lockservice.ReleaseRequest{ID: held.ID}))
	cs := waitQueue(t, s.client, p, 1)
	require.Equal(t, held.Node, cs[0].Node, "the lease's node is still there")
	code, body := s.call(t, "POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: id})
	require.Equal(t, http.StatusOK, code, string(body))
	var lr lockservice.LeaseResponse
	require.NoError(t, json.Unmarshal(body, &lr))
	require.Len(t, lr.Holdings, 1)
	require.Empty(t, lr.Holdings[0].Lost, "the holding is still held")

	// A stream's holding id is no holding of the lease.
	st := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: lockPath(t), Try: true})
	granted := st.next(t)
	require.Equal(t, "granted", granted.Event)
	require.Equal(t, "not_found", s.errorCode(t, http.StatusNotFound, "POST", "/v1/lease/release", lockservice.LeaseReleaseRequest{Lease: id, ID: granted.ID}))
	code, body = s.call(t, "POST", "/v1/lock/release", lockservice.ReleaseRequest{ID: granted.ID})
	require.Equal(t, http.StatusOK, code, string(body))

	// The lease releases its own.
	code, body = s.call(t, "POST", "/v1/lease/release", lockservice.LeaseReleaseRequest{Lease: id, ID: held.ID})
	require.Equal(t, http.StatusOK, code, string(body))
	waitQueue(t, s.client, p, 0)
}

// A caller's lock inside another caller's lock path is refused (409
// nested_path) and leaves P's queue alone; a segment named like a lock node
// is a bad path. Before, the inner lock was granted, its name sat in P's
// queue, and P's later contenders failed with incompatible.
func TestNestedPathRefusedByTheService(t *testing.T) {
	t.Parallel()
	s := serveAsking(t, leaseSession, lockservice.Config{})
	p := lockPath(t)
	outer := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Try: true})
	require.Equal(t, "granted", outer.next(t).Event)
	id := s.grantLease(t, "2s")
	require.Equal(t, "nested_path", s.errorCode(t, http.StatusConflict, "POST", "/v1/lease/acquire", lockservice.LeaseAcquireRequest{Lease: id, Path: p + "/x", Try: true}))
	require.Equal(t, "bad_path", s.errorCode(t, http.StatusBadRequest, "POST", "/v1/lease/acquire", lockservice.LeaseAcquireRequest{Lease: id, Path: p + "/y-lock-0000000001", Try: true}))
	require.Len(t, waitQueue(t, s.client, p, 1), 1, "P's queue holds P's holder only")
	waiter := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p})
	waitQueue(t, s.client, p, 2)
	outer.leave(t)
	require.Equal(t, "granted", waiter.next(t).Event, "P's waiter is granted as if nothing happened")
	waiter.leave(t)
}
