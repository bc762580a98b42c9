package lockservice_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
	"github.com/zklock/zklock/zktest"
)

// leaseSession is the session timeout of the lease tests' services: a
// lease's TTL may be up to a third of it, 2s.
const leaseSession = 6 * time.Second

// expiryMargin is the stated bound past the TTL within which a lease whose
// keep-alives stopped has its lock nodes deleted: the timer's lateness and
// one ZooKeeper round trip, with room for a loaded, shared machine.
const expiryMargin = 1500 * time.Millisecond

// grantLease grants a lease of ttl and returns its id.
func (s *served) grantLease(t *testing.T, ttl string) string {
	t.Helper()
	code, body := s.call(t, "POST", "/v1/lease/grant", lockservice.LeaseGrantRequest{TTL: ttl})
	require.Equal(t, http.StatusOK, code, string(body))
	checkSchemaJSON(t, "LeaseResponse", body)
	var lr lockservice.LeaseResponse
	require.NoError(t, json.Unmarshal(body, &lr))
	return lr.Lease
}

// leaseLock takes a lock with lease id and returns the answer.
func (s *served) leaseLock(t *testing.T, req lockservice.LeaseAcquireRequest) lockservice.LeaseAcquireResponse {
	t.Helper()
	code, body := s.call(t, "POST", "/v1/lease/acquire", req)
	require.Equal(t, http.StatusOK, code, string(body))
	checkSchemaJSON(t, "LeaseAcquireResponse", body)
	var out lockservice.LeaseAcquireResponse
	require.NoError(t, json.Unmarshal(body, &out))
	require.True(t, out.Granted)
	return out
}

// errorCode sends a request that must fail with status and returns its code.
func (s *served) errorCode(t *testing.T, status int, method, route string, body any) string {
	t.Helper()
	code, raw := s.call(t, method, route, body)
	require.Equal(t, status, code, string(raw))
	checkSchemaJSON(t, "ErrorResponse", raw)
	var e lockservice.ErrorResponse
	require.NoError(t, json.Unmarshal(raw, &e))
	return e.Code
}

// TestLeaseExpiry: a lease kept alive holds past its TTL; once its
// keep-alives stop, the service deletes its lock node within TTL plus
// expiryMargin of the last keep-alive's sending, the waiter is granted only
// after, and the next keep-alive and release answer 410 lease_expired.
func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	s := serveAsking(t, leaseSession, lockservice.Config{})
	p := lockPath(t)
	const ttl = time.Second
	id := s.grantLease(t, ttl.String())
	held := s.leaseLock(t, lockservice.LeaseAcquireRequest{Lease: id, Path: p, Try: true})
	waiter := s.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p})
	waitQueue(t, s.client, p, 2)

	// Kept alive for twice its TTL: still held.
	var sent time.Time
	for range 6 {
		sent = time.Now()
		code, body := s.call(t, "POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: id})
		require.Equal(t, http.StatusOK, code, string(body))
		checkSchemaJSON(t, "LeaseResponse", body)
		var lr lockservice.LeaseResponse
		require.NoError(t, json.Unmarshal(body, &lr))
		require.Len(t, lr.Holdings, 1)
		require.Equal(t, held.ID, lr.Holdings[0].ID)
		require.Empty(t, lr.Holdings[0].Lost)
		time.Sleep(ttl / 3) // the duration measured: keep-alives at a third of the TTL
	}
	require.Equal(t, held.Node, waitQueue(t, s.client, p, 2)[0].Node, "held through twice the TTL")

	// The keep-alives stop: the waiter is granted once the TTL has passed.
	granted := waiter.next(t)
	after := time.Since(sent)
	require.Equal(t, "granted", granted.Event)
	require.Greater(t, granted.Token, held.Token)
	require.GreaterOrEqual(t, after, ttl, "granted before the lease's TTL passed")
	require.Less(t, after, ttl+expiryMargin, "the lease's node outlived TTL + margin")
	t.Logf("granted %v after the last keep-alive was sent (ttl %v)", after, ttl)

	require.Equal(t, "lease_expired", s.errorCode(t, http.StatusGone, "POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: id}))
	require.Equal(t, "lease_expired", s.errorCode(t, http.StatusGone, "POST", "/v1/lease/release", lockservice.LeaseReleaseRequest{Lease: id, ID: held.ID}))
	require.Equal(t, "lease_expired", s.errorCode(t, http.StatusGone, "POST", "/v1/lease/acquire", lockservice.LeaseAcquireRequest{Lease: id, Path: p, Try: true}))
	require.Equal(t, "lease_expired", s.errorCode(t, http.StatusGone, "GET", "/v1/lease/holdings?lease="+id, nil))
}

// TestLeaseRevokeAndRelease: a lease holds a mutex, a reader and 2 of a
// semaphore's 3 permits, lists them, releases one by id, loses one to a
// deletion (its release answers 409 lost), and a revoke releases the rest.
func TestLeaseRevokeAndRelease(t *testing.T) {
	t.Parallel()
	s := serveAsking(t, leaseSession, lockservice.Config{})
	id := s.grantLease(t, "2s")
	pm, pr, ps, px := lockPath(t), lockPath(t), lockPath(t), lockPath(t)
	m := s.leaseLock(t, lockservice.LeaseAcquireRequest{Lease: id, Path: pm, Timeout: "5s"})
	r := s.leaseLock(t, lockservice.LeaseAcquireRequest{Lease: id, Path: pr, Kind: "read", Try: true})
	sem := s.leaseLock(t, lockservice.LeaseAcquireRequest{Lease: id, Path: ps, Kind: "semaphore", Limit: 3, Permits: 2, Timeout: "5s"})
	x := s.leaseLock(t, lockservice.LeaseAcquireRequest{Lease: id, Path: px, Try: true})
	require.Equal(t, "locked", s.errorCode(t, http.StatusConflict, "POST", "/v1/lease/acquire", lockservice.LeaseAcquireRequest{Lease: id, Path: pm, Try: true}), "a lease's mutex is not reentrant")
	require.Equal(t, "timeout", s.errorCode(t, http.StatusRequestTimeout, "POST", "/v1/lease/acquire", lockservice.LeaseAcquireRequest{Lease: id, Path: pm, Timeout: "100ms"}))

	code, body := s.call(t, "GET", "/v1/lease/holdings?lease="+id, nil)
	require.Equal(t, http.StatusOK, code, string(body))
	checkSchemaJSON(t, "LeaseResponse", body)
	var lr lockservice.LeaseResponse
	require.NoError(t, json.Unmarshal(body, &lr))
	require.Len(t, lr.Holdings, 4)
	require.Equal(t, []string{"mutex", "read", "semaphore", "mutex"}, []string{lr.Holdings[0].Kind, lr.Holdings[1].Kind, lr.Holdings[2].Kind, lr.Holdings[3].Kind})

	// Released by id.
	code, body = s.call(t, "POST", "/v1/lease/release", lockservice.LeaseReleaseRequest{Lease: id, ID: x.ID})
	require.Equal(t, http.StatusOK, code, string(body))
	checkSchemaJSON(t, "ReleaseResponse", body)
	waitQueue(t, s.client, px, 0)
	require.Equal(t, "not_found", s.errorCode(t, http.StatusNotFound, "POST", "/v1/lease/release", lockservice.LeaseReleaseRequest{Lease: id, ID: x.ID}))

	// Lost to a deletion: the keep-alive says so, the release answers 409.
	raw := zktest.Connect(t, cluster.Addrs(), 4*time.Second)
	require.NoError(t, raw.Delete(m.Node, -1))
	eventually(t, "the keep-alive reports the loss", func() bool {
		code, body := s.call(t, "POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: id})
		require.Equal(t, http.StatusOK, code, string(body))
		require.NoError(t, json.Unmarshal(body, &lr))
		return lr.Holdings[0].ID == m.ID && lr.Holdings[0].Lost != ""
	})
	require.Contains(t, lr.Holdings[0].Lost, "lock lost")
	require.Equal(t, "lost", s.errorCode(t, http.StatusConflict, "POST", "/v1/lease/release", lockservice.LeaseReleaseRequest{Lease: id, ID: m.ID}))

	// Revoked: the reader and both permits are released before the answer.
	code, body = s.call(t, "POST", "/v1/lease/revoke", lockservice.LeaseRequest{Lease: id})
	require.Equal(t, http.StatusOK, code, string(body))
	checkSchemaJSON(t, "RevokeResponse", body)
	var rv lockservice.RevokeResponse
	require.NoError(t, json.Unmarshal(body, &rv))
	require.Equal(t, lockservice.RevokeResponse{Lease: id, Revoked: true, Released: 2}, rv)
	for _, p := range []string{pm, pr, ps} {
		require.Empty(t, contenders(t, s.client, p), "%s released by the revoke", p)
	}
	_ = r
	_ = sem
	require.Equal(t, "lease_revoked", s.errorCode(t, http.StatusGone, "POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: id}))
}

// contenders lists path once.
func contenders(t *testing.T, c *zklock.Client, path string) []zklock.Contender {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs, err := c.Contenders(ctx, path)
	require.NoError(t, err)
	return cs
}

// TestLeaseBounds: TTLs out of range, a wait without a timeout, too many
// leases or holdings, another caller's lease: refused with the message.
func TestLeaseBounds(t *testing.T) {
	t.Parallel()
	s := serveAsking(t, leaseSession, lockservice.Config{MaxLeases: 1, MaxHolds: 1, Tokens: map[string]string{"a": "alice", "b": "bob"}})
	s.token = "a"
	for _, ttl := range []string{"10ms", "2001ms", "1h", "soon", ""} {
		code, body := s.call(t, "POST", "/v1/lease/grant", lockservice.LeaseGrantRequest{TTL: ttl})
		require.Equal(t, http.StatusBadRequest, code, "ttl %q: %s", ttl, body)
		checkSchemaJSON(t, "ErrorResponse", body)
		require.Contains(t, string(body), "between 1s and 2s (a third of the session timeout 6s ZooKeeper granted the service")
		require.Contains(t, string(body), `"code":"bad_ttl"`)
	}
	id := s.grantLease(t, "2s")
	require.Equal(t, "too_many", s.errorCode(t, http.StatusTooManyRequests, "POST", "/v1/lease/grant", lockservice.LeaseGrantRequest{TTL: "2s"}))
	p := lockPath(t)
	for _, req := range []lockservice.LeaseAcquireRequest{
		{Lease: id, Path: p},
		{Lease: id, Path: p, Timeout: "6m"},
	} {
		code, body := s.call(t, "POST", "/v1/lease/acquire", req)
		require.Equal(t, http.StatusBadRequest, code, string(body))
		require.Contains(t, string(body), "needs try, or a timeout of at most 5m0s")
	}
	s.leaseLock(t, lockservice.LeaseAcquireRequest{Lease: id, Path: p, Try: true})
	require.Equal(t, "too_many", s.errorCode(t, http.StatusTooManyRequests, "POST", "/v1/lease/acquire", lockservice.LeaseAcquireRequest{Lease: id, Path: lockPath(t), Try: true}), "a lease's holding counts against --max-holds")

	// Another caller cannot use it.
	bob := *s
	bob.token = "b"
	require.Equal(t, "not_found", bob.errorCode(t, http.StatusNotFound, "POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: id}))
	require.Equal(t, "not_found", bob.errorCode(t, http.StatusNotFound, "POST", "/v1/lease/revoke", lockservice.LeaseRequest{Lease: id}))
	require.Equal(t, "not_found", s.errorCode(t, http.StatusNotFound, "POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: "nope"}))
}

// TestLeaseServiceRestarted: a lease granted and a lock taken, the service
// stopped and another started in its place: the lock is free, and the
// caller's next call with the lease answers 410 lease_lost.
func TestLeaseServiceRestarted(t *testing.T) {
	t.Parallel()
	first := serveAsking(t, leaseSession, lockservice.Config{})
	p := lockPath(t)
	id := first.grantLease(t, "2s")
	first.leaseLock(t, lockservice.LeaseAcquireRequest{Lease: id, Path: p, Try: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, first.svc.Close(ctx))
	second := serveAsking(t, leaseSession, lockservice.Config{})
	waitQueue(t, second.client, p, 0)
	for _, call := range []struct {
		method, route string
		body          any
	}{
		{"POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: id}},
		{"POST", "/v1/lease/release", lockservice.LeaseReleaseRequest{Lease: id, ID: "x"}},
		{"POST", "/v1/lease/acquire", lockservice.LeaseAcquireRequest{Lease: id, Path: p, Try: true}},
	} {
		code, body := second.call(t, call.method, call.route, call.body)
		require.Equal(t, http.StatusGone, code, string(body))
		require.Contains(t, string(body), `"code":"lease_lost"`)
		require.Contains(t, string(body), "restarted")
	}
	// The stopped one says why, too: the lease is lost (it ended with the
	// service's stop), anything else is refused.
	code, body := first.call(t, "POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: id})
	require.Equal(t, http.StatusGone, code, string(body))
	require.Contains(t, string(body), `"code":"lease_lost"`)
	require.Contains(t, string(body), "the service is stopping")
	require.Equal(t, "closing", first.errorCode(t, http.StatusServiceUnavailable, "POST", "/v1/lease/grant", lockservice.LeaseGrantRequest{TTL: "1s"}))
}

// TestLeaseSessionCut: the service's ZooKeeper connection stalls while a
// lease holds a lock and is kept alive. Keep-alives stop being acknowledged
// (503) once the service has no fresh proof of contact, the lease then ends
// (lease_expired, its TTL passed unacknowledged, or lease_lost), and a waiter on another session is granted only after the
// caller's rule (last acknowledged keep-alive's sending + TTL) has passed.
func TestLeaseSessionCut(t *testing.T) {
	t.Parallel()
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	s := serveAsking(t, leaseSession, lockservice.Config{}, proxy.Addr())
	p := lockPath(t)
	const ttl = 2 * time.Second
	id := s.grantLease(t, ttl.String())
	s.leaseLock(t, lockservice.LeaseAcquireRequest{Lease: id, Path: p, Try: true})

	octx, ocancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ocancel()
	other, err := zklock.Connect(octx, cluster.Addrs(), zklock.WithSessionTimeout(4*time.Second))
	require.NoError(t, err)
	defer other.Close()
	done := make(chan struct{})
	defer func() { <-done }()
	grantedAt := make(chan time.Time, 1)
	go func() {
		defer close(done)
		m, err := other.NewMutex(p)
		if err != nil {
			grantedAt <- time.Time{}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := m.Acquire(ctx)
		grantedAt <- time.Now()
		if err == nil {
			_ = l.Release(context.Background())
		}
	}()
	waitQueue(t, other, p, 2)

	stalled := time.Now()
	proxy.Stall()
	defer proxy.Resume()
	var lastAcked time.Time
	var lastCode string
	eventually(t, "the lease lost", func() bool {
		sent := time.Now()
		code, body := s.call(t, "POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: id})
		switch code {
		case http.StatusOK:
			lastAcked = sent
		default:
			var e lockservice.ErrorResponse
			require.NoError(t, json.Unmarshal(body, &e))
			lastCode = e.Code
			t.Logf("%s at +%v", e.Code, sent.Sub(stalled))
			require.Contains(t, []string{"unreachable", "lease_lost", "lease_expired"}, e.Code, string(body))
		}
		time.Sleep(100 * time.Millisecond)
		return lastCode == "lease_lost" || lastCode == "lease_expired"
	})
	deadline := lastAcked.Add(ttl)
	proxy.Resume()
	var at time.Time
	select {
	case at = <-grantedAt:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter was not granted within 30s")
	}
	require.False(t, at.IsZero())
	t.Logf("granted at +%v", at.Sub(stalled))
	require.True(t, at.After(deadline), "granted %v before the caller's deadline", deadline.Sub(at))
	t.Logf("the waiter was granted %v after the caller's deadline", at.Sub(deadline))
}

// TestLeaseLongestTTLKeptAlive: at the longest TTL (a third of the session
// timeout), a lease kept alive every third of its TTL keeps its lock for
// three session timeouts. A keep-alive is acknowledged only while the
// service's client trusts the lock until its arrival plus the TTL
// (Lease.Deadline): the leader's word it counts from may be older than the
// service's own proof, so some keep-alives may be refused (503); never so
// many in a row that the caller's rule would end the lease.
func TestLeaseLongestTTLKeptAlive(t *testing.T) {
	t.Parallel()
	s := serveAsking(t, leaseSession, lockservice.Config{})
	p := lockPath(t)
	ttl := leaseSession / 3
	id := s.grantLease(t, ttl.String())
	held := s.leaseLock(t, lockservice.LeaseAcquireRequest{Lease: id, Path: p, Try: true})
	lastAck, acked, refused := time.Now(), 0, 0
	for end := time.Now().Add(3 * leaseSession); time.Now().Before(end); {
		sent := time.Now()
		code, body := s.call(t, "POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: id})
		switch code {
		case http.StatusOK:
			acked++
			lastAck = sent
		case http.StatusServiceUnavailable:
			refused++
		default:
			t.Fatalf("keep-alive answered %d: %s", code, body)
		}
		require.Less(t, time.Since(lastAck), ttl, "no keep-alive acknowledged within the TTL: the caller must stop")
		time.Sleep(ttl / 3) // the duration measured: keep-alives at a third of the TTL
	}
	t.Logf("ttl %v: %d keep-alives acknowledged, %d refused", ttl, acked, refused)
	require.Equal(t, held.Node, waitQueue(t, s.client, p, 1)[0].Node, "held throughout")
}

// TestSetTokens: a reload that removes a token ends what was taken with it
// and nothing else: its holding stream says "lost", its waiting stream
// "failed", its watch ends, its lease answers 410 lease_lost; the same
// caller's other token (a rotation) keeps its stream. A removed token is
// refused (401), an added one accepted.
func TestSetTokens(t *testing.T) {
	t.Parallel()
	s := serveAsking(t, leaseSession, lockservice.Config{Heartbeat: 100 * time.Millisecond, Tokens: map[string]string{"old": "alice", "new": "alice", "b": "bob"}})
	as := func(tok string) *served { c := *s; c.token = tok; return &c }
	old, nw, bob := as("old"), as("new"), as("b")
	held, other := lockPath(t), lockPath(t)

	holding := old.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: held})
	require.Equal(t, "granted", holding.next(t).Event)
	waiting := old.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: held})
	require.Equal(t, http.StatusOK, waiting.status(t))
	rotated := nw.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: other})
	require.Equal(t, "granted", rotated.next(t).Event)
	watch := old.do(t, "GET", "/v1/election/watch?path="+other, nil)
	defer watch.Body.Close()
	require.Equal(t, http.StatusOK, watch.StatusCode)
	lease := old.grantLease(t, "2s")
	waitQueue(t, s.client, held, 2)

	_, err := s.svc.SetTokens(nil)
	require.Error(t, err)
	ch, err := s.svc.SetTokens(map[string]string{"new": "alice", "b": "bob", "c": "carol"})
	require.NoError(t, err)
	require.Equal(t, lockservice.TokenChange{Tokens: 3, Added: 1, Removed: 1}, ch)

	lost := holding.next(t)
	require.Equal(t, "lost", lost.Event)
	require.Contains(t, lost.Reason, "token was removed")
	failed := waiting.next(t)
	require.Equal(t, "failed", failed.Event)
	require.Equal(t, "failed", failed.Code)
	require.Contains(t, failed.Reason, "token was removed")
	holding.ended(t)
	waiting.ended(t)
	rest, err := io.ReadAll(watch.Body) // ends
	require.NoError(t, err)
	require.Contains(t, string(rest), ": the caller's token was removed")
	waitQueue(t, s.client, held, 0)

	code, body := old.call(t, "POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: lease})
	require.Equal(t, http.StatusGone, code, string(body))
	require.Contains(t, string(body), `"code":"lease_lost"`)
	require.Contains(t, string(body), "token was removed")
	require.Equal(t, "unauthorized", old.errorCode(t, http.StatusUnauthorized, "POST", "/v1/lease/grant", lockservice.LeaseGrantRequest{TTL: "1s"}))
	require.Equal(t, "unauthorized", old.errorCode(t, http.StatusUnauthorized, "POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: "nope"}))
	carol := as("c").grantLease(t, "1s")
	require.Equal(t, "not_found", bob.errorCode(t, http.StatusNotFound, "POST", "/v1/lease/keepalive", lockservice.LeaseRequest{Lease: carol}))

	// The rotated token's stream holds on.
	require.Equal(t, "heartbeat", rotated.nextAny(t).Event)
	code, body = nw.call(t, "GET", "/v1/lock/status?path="+other, nil)
	require.Equal(t, http.StatusOK, code, string(body))
	rotated.leave(t)
}
