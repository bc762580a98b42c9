package lockservice_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
)

// k permits are k lock nodes and count k against --max-holds: with
// --max-holds 1, a stream asking for 300 permits of a semaphore of 300 held
// 300 nodes on 42fd6c9 while any second request was refused 429. Now the
// request for 300 is refused, 2 of a 2-permit bound fit, and a limit above
// the service's bound is a bad request.
func TestPermitsCountAgainstMaxHolds(t *testing.T) {
	t.Parallel()
	s := serveAsking(t, leaseSession, lockservice.Config{MaxHolds: 2})
	p := lockPath(t)
	require.Equal(t, "bad_request", s.errorCode(t, http.StatusBadRequest, "POST", "/v1/lock/acquire",
		lockservice.AcquireRequest{Path: p, Kind: "semaphore", Limit: 300, Permits: 300, Try: true}), "can never fit 2")
	id := s.grantLease(t, "2s")
	require.Equal(t, "bad_request", s.errorCode(t, http.StatusBadRequest, "POST", "/v1/lease/acquire",
		lockservice.LeaseAcquireRequest{Lease: id, Path: p, Kind: "semaphore", Limit: 300, Permits: 3, Try: true}))
	require.Empty(t, contenders(t, s.client, p), "nothing was taken")
	held := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Kind: "semaphore", Limit: 300, Permits: 2, Try: true})
	require.Equal(t, "granted", held.next(t).Event)
	require.Equal(t, "too_many", s.errorCode(t, http.StatusTooManyRequests, "POST", "/v1/lock/acquire",
		lockservice.AcquireRequest{Path: lockPath(t), Try: true}), "2 permits use the caller's 2")
	require.Equal(t, "too_many", s.errorCode(t, http.StatusTooManyRequests, "POST", "/v1/lock/acquire",
		lockservice.AcquireRequest{Path: lockPath(t), Kind: "semaphore", Limit: 5, Permits: 2, Try: true}), "2 more would not fit now")
	held.leave(t)
	require.Equal(t, "bad_request", s.errorCode(t, http.StatusBadRequest, "POST", "/v1/lock/acquire",
		lockservice.AcquireRequest{Path: p, Kind: "semaphore", Limit: 1001, Try: true}))
}

// With tokens, the token's name is always in the owner the status shows:
// bob claiming to be alice shows as "alice [token bob] (...)". On 42fd6c9 it
// showed as alice, and nothing said bob held it.
func TestStatusNamesTheToken(t *testing.T) {
	t.Parallel()
	s := serve(t, lockservice.Config{Tokens: map[string]string{"a": "alice", "b": "bob"}})
	bob := *s
	bob.token = "b"
	p := lockPath(t)
	held := bob.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p, Try: true, Owner: "alice", Host: "web-3", PID: 4242})
	require.Equal(t, "granted", held.next(t).Event)
	cs := waitQueue(t, s.client, p, 1)
	require.Equal(t, "alice [token bob] (host web-3 pid 4242)", cs[0].Owner.Name)
	own := bob.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: lockPath(t), Try: true})
	require.Equal(t, "granted", own.next(t).Event)
	held.leave(t)
	own.leave(t)
}

// Ended leases are remembered per caller: another caller's churn never
// turns my lease's 410 into 404. On 42fd6c9 one list of 4 096 was shared,
// and 4 100 leases granted and revoked by another caller erased mine.
func TestEndedLeasesAreRememberedPerCaller(t *testing.T) {
	s := serveAsking(t, leaseSession, lockservice.Config{Tokens: map[string]string{"a": "alice", "b": "bob"}, MaxLeases: 4})
	alice, bob := *s, *s
	alice.token, bob.token = "a", "b"
	mine := alice.grantLease(t, "2s")
	code, body := alice.call(t, "POST", "/v1/lease/revoke", lockservice.LeaseRequest{Lease: mine})
	require.Equal(t, http.StatusOK, code, string(body))
	defer lockservice.SetMaxEndedLeases(8)()
	for range 12 { // past the bound: with one shared list, bob's churn erased alice's lease
		id := bob.grantLease(t, "2s")
		code, body := bob.call(t, "POST", "/v1/lease/revoke", lockservice.LeaseRequest{Lease: id})
		require.Equal(t, http.StatusOK, code, string(body))
	}
	require.Equal(t, "lease_revoked", alice.errorCode(t, http.StatusGone, "POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: mine}))
}
