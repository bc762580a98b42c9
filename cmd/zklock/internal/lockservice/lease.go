package lockservice

// Leases: holdings for callers that cannot keep a request open (a cron
// script, a PHP request, a serverless function, a shell script that takes
// a lock in one step and releases it in another). A lease has a time to
// live; the caller keeps it alive with plain requests, takes locks with it
// (each answered by one JSON object), releases them by id, and revokes it.
//
// The caller's rule: stop using what the lease holds before its TTL has
// passed since the caller sent its last acknowledged keep-alive (or the
// grant). The service keeps that promise:
//   - it counts the TTL from when a keep-alive arrives, after it was sent,
//     and only when the TTL has passed does it delete the lease's lock
//     nodes; nobody else can be granted them before they are deleted;
//   - it acknowledges a keep-alive (or a grant) that arrived at a only
//     while the service's client trusts every lock the lease holds until
//     at least a + TTL (zklock.Lease.Deadline: 80 % of the session timeout
//     T that ZooKeeper granted, Client.SessionTimeout, after ZooKeeper's
//     leader last confirmed the session, which is before the leader could
//     expire it and grant the locks to anyone else), and a lock taken with
//     the lease is answered only if it is trusted until the lease's
//     current deadline; the caller's deadline (its sending plus TTL) comes
//     before. If the service's session is cut off right after an
//     acknowledgement, the caller stops first.
//   - it also wants a proof of contact sent no earlier than
//     a - (0.75 T - TTL) (a sync: one serves every keep-alive that arrives
//     while it is fresh), so that a keep-alive is refused at once when
//     ZooKeeper does not answer. (Being in "connected" state is no proof:
//     go-zookeeper notices a silent server only after 2/3 T, and pings only
//     every T/3.) A TTL is at most T/3. The client's keep-alive proves the
//     leader's word about every 0.3 T, so a keep-alive at the longest TTL
//     may now and then find the word too old and be refused (503); one sent
//     every third of the TTL finds it fresh in time.
// What it cannot promise: a lock node deleted by someone else (zklock break)
// is lost at once; the caller learns it at its next keep-alive.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/zklock/zklock"
)

// DefaultMaxLeases is how many leases one caller may have at once when
// Config.MaxLeases is 0.
const DefaultMaxLeases = 16

// MinLeaseTTL is the shortest TTL a lease may have: room for a keep-alive's
// round trip.
const MinLeaseTTL = time.Second

// maxLeaseWait bounds the timeout of a lease's blocking acquire: its answer
// is one JSON object, with no heartbeat to keep proxies from cutting it.
const maxLeaseWait = 5 * time.Minute

// lease is one caller's lease. Its fields but id, caller, ttl, ctx and
// cancel are guarded by Service.mu.
type lease struct {
	id, caller string
	cred       *credential // the token it was granted with: the lease ends with it
	ttl        time.Duration
	ctx        context.Context // ended with the lease: its holdings release
	cancel     context.CancelFunc

	deadline time.Time   // the TTL from the last keep-alive
	timer    *time.Timer // fires at deadline (or earlier: then re-armed)
	holdings map[string]*holding
	order    []string // holding ids, oldest first
	ended    *leaseEnded
}

// leaseEnded is why a lease ended: its code and message.
type leaseEnded struct {
	caller, code, reason string
	cred                 *credential
}

// The codes of a lease's end, answered 410 to every later call with it.
const (
	codeExpired = "lease_expired" // its TTL passed without a keep-alive
	codeLost    = "lease_lost"    // the service's session was lost, or it restarted, or stopped
	codeRevoked = "lease_revoked" // the caller revoked it
)

// maxEndedLeases bounds how many ended leases the service remembers of each
// caller, so that a call with one answers how it ended: per caller, so that
// another caller's churn never erases how mine ended.
var maxEndedLeases = 1024 // a test lowers it

// leaseTTLBounds returns the shortest and longest TTL a lease may have, and
// the session timeout ZooKeeper granted the service, which bounds it.
func (s *Service) leaseTTLBounds() (lo, hi, granted time.Duration) {
	granted = s.c.SessionTimeout()
	return MinLeaseTTL, granted / 3, granted
}

// MaxLeaseTTL is the longest TTL a lease may have now, or a live lease
// has: a third of the session timeout ZooKeeper granted the service's
// client, or a live lease's longer TTL, granted before a reconnection's
// smaller grant lowered the bound (the client keeps a session's smallest).
// Stopping waits that long for the leases' deadlines.
func (s *Service) MaxLeaseTTL() time.Duration {
	_, hi, _ := s.leaseTTLBounds()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leases {
		hi = max(hi, l.ttl)
	}
	return hi
}

// leaseGrant answers POST /v1/lease/grant.
func (s *Service) leaseGrant(w http.ResponseWriter, r *http.Request, caller string) {
	arrival := time.Now()
	var req LeaseGrantRequest
	if !decode(w, r, &req) {
		return
	}
	ttl, err := time.ParseDuration(req.TTL)
	lo, hi, granted := s.leaseTTLBounds()
	if err != nil || ttl < lo || ttl > hi {
		writeError(w, http.StatusBadRequest, "bad_ttl", fmt.Sprintf("ttl %q is not a duration between %v and %v (a third of the session timeout %v ZooKeeper granted the service: the most it can promise if its own session is cut off; start it with a longer --session-timeout, within the servers' maxSessionTimeout, for longer leases)", req.TTL, lo, hi, granted))
		return
	}
	if !s.acknowledge(w, r, arrival, ttl) {
		return
	}
	s.watchSession()
	ctx, cancel := context.WithCancel(s.ctx)
	cred := credOf(r)
	l := &lease{id: s.instance + "." + newID(), caller: caller, cred: cred, ttl: ttl, ctx: ctx, cancel: cancel, holdings: map[string]*holding{}}
	s.mu.Lock()
	if cred.removed() { // a reload removed the token meanwhile (SetTokens ends its leases under s.mu)
		s.mu.Unlock()
		cancel()
		writeError(w, http.StatusUnauthorized, "unauthorized", "this bearer token was removed from the service's --token-file")
		return
	}
	if s.leasesOf[caller] >= s.cfg.MaxLeases {
		s.mu.Unlock()
		cancel()
		writeError(w, http.StatusTooManyRequests, "too_many", fmt.Sprintf("caller %s has %d leases already, the most this service allows", caller, s.cfg.MaxLeases))
		return
	}
	if s.closed {
		s.mu.Unlock()
		cancel()
		writeError(w, http.StatusServiceUnavailable, "closing", "the service is stopping")
		return
	}
	s.leasesOf[caller]++
	s.leases[l.id] = l
	l.deadline = arrival.Add(ttl)
	l.timer = time.AfterFunc(ttl, func() { s.expire(l) })
	resp := s.leaseResponse(l)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, resp)
}

// inContact answers 503 and returns false unless the service's session is
// in contact with ZooKeeper: a grant or keep-alive is acknowledged only then.
func (s *Service) inContact(w http.ResponseWriter) bool {
	switch st := s.c.State(); st {
	case zklock.StateConnected, zklock.StateReconnected:
		return true
	default:
		writeError(w, http.StatusServiceUnavailable, "unreachable", "the service is not in contact with ZooKeeper ("+st.String()+"): the lease is not extended; stop before its TTL has passed since your last acknowledged keep-alive was sent")
		return false
	}
}

// expire ends l if its deadline has passed, or re-arms its timer.
func (s *Service) expire(l *lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.ended != nil {
		return
	}
	if left := time.Until(l.deadline); left > 0 {
		l.timer.Reset(left)
		return
	}
	s.endLeaseLocked(l, codeExpired, fmt.Sprintf("the lease's ttl %v passed without a keep-alive; its locks were released", l.ttl))
}

// endLeaseLocked ends l: every later call with it answers 410 with code and
// reason, and its holdings release (their goroutines delete their nodes).
// Called with s.mu held.
func (s *Service) endLeaseLocked(l *lease, code, reason string) {
	if l.ended != nil {
		return
	}
	l.ended = &leaseEnded{caller: l.caller, cred: l.cred, code: code, reason: reason}
	l.timer.Stop()
	l.cancel()
	delete(s.leases, l.id)
	if s.leasesOf[l.caller]--; s.leasesOf[l.caller] <= 0 {
		delete(s.leasesOf, l.caller)
	}
	s.endedLeases[l.id] = l.ended
	fifo := append(s.endedFIFO[l.caller], l.id)
	if len(fifo) > maxEndedLeases {
		delete(s.endedLeases, fifo[0])
		fifo = slices.Delete(fifo, 0, 1)
	}
	s.endedFIFO[l.caller] = fifo
}

// endLeases ends every lease (the service's session was lost, or it is
// stopping).
func (s *Service) endLeases(code, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leases {
		s.endLeaseLocked(l, code, reason)
	}
}

// watchSession starts, once, the goroutine that ends every lease when the
// service's ZooKeeper session is lost.
func (s *Service) watchSession() {
	s.watchOnce.Do(func() {
		states := s.c.StateChanges(s.ctx)
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			for st := range states {
				switch st {
				case zklock.StateLost, zklock.StateExpired, zklock.StateClosed:
					s.endLeases(codeLost, "the service's ZooKeeper session was lost ("+st.String()+"): every lease's locks are lost")
				}
			}
		}()
	})
}

// findLease returns caller's live lease id, or answers (404, or 410 with
// how it ended) and returns nil.
func (s *Service) findLease(w http.ResponseWriter, caller, id string) *lease {
	s.mu.Lock()
	l := s.leases[id]
	e := s.endedLeases[id]
	s.mu.Unlock()
	switch {
	case l != nil && l.caller == caller:
		return l
	case e != nil && e.caller == caller:
		writeEnded(w, id, e)
	case leaseID.MatchString(id) && !strings.HasPrefix(id, s.instance+"."):
		writeError(w, http.StatusGone, codeLost, "lease "+id+" was not granted by this run of the service: it restarted since, and the lease's locks ended with it")
	default:
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no lease %q of this caller", id))
	}
	return nil
}

// leaseOf returns the lease id a call of route rt names ("" for other
// routes), reading the body of a POST: for a call the service does not
// serve (its token was removed, or the service is stopping) but answers
// with how the lease ended.
func leaseOf(w http.ResponseWriter, r *http.Request, rt Route) string {
	switch rt.Path {
	case "/v1/lease/holdings":
		return r.URL.Query().Get("lease")
	case "/v1/lease/keepalive", "/v1/lease/acquire", "/v1/lease/release", "/v1/lease/revoke":
		var req struct{ Lease string }
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err == nil && json.Unmarshal(body, &req) == nil {
			return req.Lease
		}
	}
	return ""
}

// refuseClosing answers a request that arrives while the service stops:
// a call with one of the caller's leases (all ended by Close) answers 410
// lease_lost, so that its caller stops at once; anything else 503 closing.
func (s *Service) refuseClosing(w http.ResponseWriter, r *http.Request, rt Route, caller string) {
	id := leaseOf(w, r, rt)
	s.mu.Lock()
	e := s.endedLeases[id]
	s.mu.Unlock()
	if e != nil && e.caller == caller {
		writeEnded(w, id, e)
		return
	}
	writeError(w, http.StatusServiceUnavailable, "closing", "the service is stopping")
}

// leaseID is the shape of every lease id: its service's run, then its own.
var leaseID = regexp.MustCompile(`^[0-9a-f]{12}\.[0-9a-f]{32}$`)

// leaseKeepAlive answers POST /v1/lease/keepalive: the TTL starts again,
// and the answer lists the lease's holdings (a lost one says why).
func (s *Service) leaseKeepAlive(w http.ResponseWriter, r *http.Request, caller string) {
	arrival := time.Now()
	var req LeaseRequest
	if !decode(w, r, &req) {
		return
	}
	l := s.findLease(w, caller, req.Lease)
	if l == nil || !s.acknowledge(w, r, arrival, l.ttl) || !s.coversTTL(w, r, l, arrival.Add(l.ttl)) {
		return
	}
	s.mu.Lock()
	if l.ended != nil {
		e := l.ended
		s.mu.Unlock()
		writeEnded(w, l.id, e)
		return
	}
	l.extend(arrival)
	resp := s.leaseResponse(l)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, resp)
}

// extend moves l's deadline to a keep-alive's arrival plus the TTL, never
// earlier: a keep-alive its caller gave up on may be answered after a later
// one, and the caller goes by the later one's sending. Called with
// Service.mu held.
func (l *lease) extend(arrival time.Time) {
	if d := arrival.Add(l.ttl); d.After(l.deadline) {
		l.deadline = d
	}
}

// leaseHoldings answers GET /v1/lease/holdings?lease=ID, without keeping
// the lease alive.
func (s *Service) leaseHoldings(w http.ResponseWriter, r *http.Request, caller string) {
	l := s.findLease(w, caller, r.URL.Query().Get("lease"))
	if l == nil {
		return
	}
	s.mu.Lock()
	resp := s.leaseResponse(l)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, resp)
}

// leaseResponse describes l; called with s.mu held.
func (s *Service) leaseResponse(l *lease) LeaseResponse {
	out := LeaseResponse{Lease: l.id, TTL: l.ttl.String(), TTLMillis: l.ttl.Milliseconds(), Holdings: []LeaseHolding{}}
	for _, h := range l.inOrder() {
		out.Holdings = append(out.Holdings, h.described)
	}
	return out
}

// inOrder returns l's holdings, oldest first; called with Service.mu held.
func (l *lease) inOrder() []*holding {
	hs := make([]*holding, 0, len(l.order))
	for _, id := range l.order {
		hs = append(hs, l.holdings[id])
	}
	return hs
}

// leaseRevoke answers POST /v1/lease/revoke: the lease ends, and every
// lock it holds is released before the answer.
func (s *Service) leaseRevoke(w http.ResponseWriter, r *http.Request, caller string) {
	var req LeaseRequest
	if !decode(w, r, &req) {
		return
	}
	l := s.findLease(w, caller, req.Lease)
	if l == nil {
		return
	}
	s.mu.Lock()
	if l.ended != nil {
		e := l.ended
		s.mu.Unlock()
		writeEnded(w, l.id, e)
		return
	}
	hs := l.inOrder()
	s.endLeaseLocked(l, codeRevoked, "the lease was revoked")
	s.mu.Unlock()
	released := 0
	for _, h := range hs {
		select {
		case <-h.ended:
		case <-r.Context().Done():
			return
		}
		if h.endErr == nil {
			released++
		}
	}
	writeJSON(w, http.StatusOK, RevokeResponse{Lease: l.id, Revoked: true, Released: released})
}
