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
//     T after ZooKeeper's leader last confirmed the session, which is
//     before the leader could expire it and grant the locks to anyone
//     else), and a lock taken with the lease is answered only if it is
//     trusted until the lease's current deadline; the caller's deadline
//     (its sending plus TTL) comes before. If the service's session is cut
//     off right after an acknowledgement, the caller stops first.
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
	"errors"
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

// maxEndedLeases bounds how many ended leases the service remembers, so
// that a call with one answers how it ended.
const maxEndedLeases = 4096

// leaseTTLBounds returns the shortest and longest TTL a lease may have.
func (s *Service) leaseTTLBounds() (time.Duration, time.Duration) {
	return MinLeaseTTL, s.cfg.SessionTimeout / 3
}

// leaseGrant answers POST /v1/lease/grant.
func (s *Service) leaseGrant(w http.ResponseWriter, r *http.Request, caller string) {
	arrival := time.Now()
	var req LeaseGrantRequest
	if !decode(w, r, &req) {
		return
	}
	ttl, err := time.ParseDuration(req.TTL)
	lo, hi := s.leaseTTLBounds()
	if err != nil || ttl < lo || ttl > hi {
		writeError(w, http.StatusBadRequest, "bad_ttl", fmt.Sprintf("ttl %q is not a duration between %v and %v (a third of the service's session timeout %v: the most it can promise if its own session is cut off; start it with a longer --session-timeout for longer leases)", req.TTL, lo, hi, s.cfg.SessionTimeout))
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
	s.endedFIFO = append(s.endedFIFO, l.id)
	if len(s.endedFIFO) > maxEndedLeases {
		delete(s.endedLeases, s.endedFIFO[0])
		s.endedFIFO = slices.Delete(s.endedFIFO, 0, 1)
	}
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
		writeError(w, http.StatusGone, e.code, "lease "+id+" has ended: "+e.reason)
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
		writeError(w, http.StatusGone, e.code, "lease "+id+" has ended: "+e.reason)
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
		writeError(w, http.StatusGone, e.code, "lease "+l.id+" has ended: "+e.reason)
		return
	}
	l.deadline = arrival.Add(l.ttl)
	resp := s.leaseResponse(l)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, resp)
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
		writeError(w, http.StatusGone, e.code, "lease "+l.id+" has ended: "+e.reason)
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

// leaseRelease answers POST /v1/lease/release: one holding of the lease
// ends; 409 lost if it was lost before.
func (s *Service) leaseRelease(w http.ResponseWriter, r *http.Request, caller string) {
	var req LeaseReleaseRequest
	if !decode(w, r, &req) {
		return
	}
	l := s.findLease(w, caller, req.Lease)
	if l == nil {
		return
	}
	s.mu.Lock()
	h := l.holdings[req.ID]
	s.mu.Unlock()
	if h == nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no holding %q of lease %s (released, or never granted)", req.ID, l.id))
		return
	}
	h.askRelease()
	select {
	case <-h.ended:
	case <-r.Context().Done():
		return
	}
	s.mu.Lock()
	if h.forgotten() {
		l.forget(h.id)
	}
	e := l.ended
	s.mu.Unlock()
	switch {
	case h.endErr != nil && e != nil:
		writeError(w, http.StatusGone, e.code, "lease "+l.id+" has ended: "+e.reason)
	case h.endErr != nil:
		writeError(w, http.StatusConflict, "lost", "the lock was lost before the release: "+reason(h.endErr))
	default:
		writeJSON(w, http.StatusOK, ReleaseResponse{ID: h.id, Released: true})
	}
}

// forgotten: a released or lost holding leaves its lease's list once its
// release was asked for.
func (h *holding) forgotten() bool {
	select {
	case <-h.release:
		return true
	default:
		return false
	}
}

// forget drops holding id from l's list; called with s.mu held.
func (l *lease) forget(id string) {
	delete(l.holdings, id)
	l.order = slices.DeleteFunc(l.order, func(o string) bool { return o == id })
}

// leaseAcquire answers POST /v1/lease/acquire: one JSON object, once the
// lock is granted (or at once with try), that names the holding by id.
func (s *Service) leaseAcquire(w http.ResponseWriter, r *http.Request, caller string) {
	var req LeaseAcquireRequest
	if !decode(w, r, &req) || !s.checkPath(w, req.Path) {
		return
	}
	timeout, ok := parseTimeout(w, req.Timeout, req.Try)
	if !ok {
		return
	}
	if !req.Try && (timeout == 0 || timeout > maxLeaseWait) {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("an acquire with a lease needs try, or a timeout of at most %v (its answer is one object, with nothing to keep a proxy from cutting a long wait)", maxLeaseWait))
		return
	}
	areq := AcquireRequest{Path: req.Path, Kind: req.Kind, Limit: req.Limit, Permits: req.Permits}
	lock, exclusive, err := s.locker(areq)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	l := s.findLease(w, caller, req.Lease)
	if l == nil {
		return
	}
	if !s.reserve(caller) {
		writeError(w, http.StatusTooManyRequests, "too_many", fmt.Sprintf("caller %s holds, waits for or watches %d locks already, the most this service allows", caller, s.cfg.MaxHolds))
		return
	}
	reserved := true
	defer func() {
		if reserved {
			s.unreserve(caller)
		}
	}()
	// The wait ends with the caller's request, the lease, the service, or
	// the timeout.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(l.ctx, cancel)
	defer stop()
	wait := ctx
	if timeout > 0 {
		var end context.CancelFunc
		wait, end = context.WithTimeout(ctx, timeout)
		defer end()
	}
	take := lock.Acquire
	if req.Try {
		take = lock.TryAcquire
	}
	owner := ownerName(r, caller, req.Owner, req.Host, req.PID) + " lease " + l.id[len(s.instance)+1:][:8]
	zl, err := take(zklock.ContextWithOwner(wait, owner))
	if err != nil {
		if s.leaseEndedAnswer(w, l) {
			return
		}
		s.acquireFailed(w, err, ctx.Err() == nil && wait.Err() != nil)
		return
	}
	kind := req.Kind
	if kind == "" {
		kind = "mutex"
	}
	h := newHolding(newID(), caller, req.Path, exclusive, zl)
	if !s.admit(ctx, h) {
		_ = zl.Release(context.Background()) // bounded by the loss, 0.8 T
		s.leaseEndedAnswer(w, l)
		return
	}
	tok, _ := zl.Token(ctx)
	h.described = LeaseHolding{ID: h.id, Path: req.Path, Kind: kind, Node: zl.Node(), Token: tok}
	s.mu.Lock()
	until := l.deadline
	s.mu.Unlock()
	trustCtx, trustEnd := context.WithTimeout(ctx, readBound)
	trusted := s.trustedUntil(trustCtx, []*holding{h}, until)
	trustEnd()
	if !trusted {
		s.unregister(h)
		_ = zl.Release(context.Background())
		writeError(w, http.StatusServiceUnavailable, "unreachable", "ZooKeeper's leader did not confirm the service's session for as long as the lease's TTL promises: the lock was released; try again")
		return
	}
	s.mu.Lock()
	if l.ended != nil || ctx.Err() != nil { // the lease ended, or the caller left, as it was granted
		s.mu.Unlock()
		s.unregister(h)
		_ = zl.Release(context.Background())
		s.leaseEndedAnswer(w, l)
		return
	}
	l.holdings[h.id] = h
	l.order = append(l.order, h.id)
	s.bg.Add(1)
	s.mu.Unlock()
	reserved = false // the holding's goroutine gives it back
	go s.keep(l, h)
	writeJSON(w, http.StatusOK, LeaseAcquireResponse{Granted: true, ID: h.id, Lease: l.id, Path: req.Path, Node: zl.Node(), Token: tok})
}

// leaseEndedAnswer answers 410 and returns true if l has ended.
func (s *Service) leaseEndedAnswer(w http.ResponseWriter, l *lease) bool {
	s.mu.Lock()
	e := l.ended
	s.mu.Unlock()
	if e == nil {
		return false
	}
	writeError(w, http.StatusGone, e.code, "lease "+l.id+" has ended: "+e.reason)
	return true
}

// keep watches one holding of a lease until it is released (by its id, or
// with the lease) or lost; it records how it ended before closing h.ended,
// so that the service grants the path to none of its other callers before
// a keep-alive would say the loss. A loss while the service's session is
// out of contact ends the whole lease.
func (s *Service) keep(l *lease, h *holding) {
	defer s.bg.Done()
	defer s.unreserve(h.caller)
	defer s.unregister(h)
	defer close(h.ended)
	select {
	case <-s.leaseDone(h.lease):
		h.endErr = s.leaseErr(h.lease)
		if h.endErr == nil { // ended without a loss: only a Close does that
			h.endErr = zklock.ErrClosed
		}
		st := s.c.State()
		s.mu.Lock()
		h.described.Lost = reason(h.endErr)
		if st != zklock.StateConnected && st != zklock.StateReconnected || errors.Is(h.endErr, zklock.ErrClosed) {
			s.endLeaseLocked(l, codeLost, "the service's ZooKeeper session was lost ("+st.String()+"): every lease's locks are lost: "+reason(h.endErr))
		}
		s.mu.Unlock()
		if len(h.lease.Parts()) > 1 {
			_ = h.lease.Release(context.Background()) // k permits: release the others
		}
	case <-h.release:
		h.endErr = s.releaseLease(h)
	case <-l.ctx.Done():
		s.mu.Lock()
		code, deadline := l.ended.code, l.deadline
		s.mu.Unlock()
		if code == codeLost { // the session was lost, or the service is stopping
			// The caller may go on until its deadline: the node stays
			// (or goes with the session, which cannot expire before it).
			s.sleepUntil(deadline)
		}
		h.endErr = s.releaseLease(h)
		if code == codeLost && h.endErr == nil {
			h.endErr = errors.New("zklock: " + l.ended.reason)
		}
	}
}

// sleepUntil waits until t, whatever ctx says: the lease's promise to its
// caller.
func (s *Service) sleepUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}

// proof is one round trip to ZooKeeper (a sync, which its server answers
// after asking the leader) made to show the session alive: the server heard
// of the session after sent, so it cannot expire it before sent plus the
// session timeout.
type proof struct {
	sent time.Time
	done chan struct{}
	err  error // valid once done is closed
}

// contactSince reports whether the service has a proof of contact sent at
// or after since, making one (one sync, shared by every keep-alive that
// waits for it) when it has none; false when ZooKeeper does not answer or
// ctx ends.
func (s *Service) contactSince(ctx context.Context, since time.Time) bool {
	for {
		s.proofMu.Lock()
		if !s.proofAt.Before(since) {
			s.proofMu.Unlock()
			return true
		}
		p := s.proofing
		if p == nil || p.sent.Before(since) && s.proofStale(p) {
			p = &proof{sent: time.Now(), done: make(chan struct{})}
			s.proofing = p
			s.bg.Add(1)
			go s.prove(p)
		}
		s.proofMu.Unlock()
		select {
		case <-p.done:
			if p.err != nil {
				return false
			}
			if !p.sent.Before(since) {
				return true
			}
		case <-ctx.Done():
			return false
		}
	}
}

// proofStale: p is in flight but too old to help; a newer one is started
// beside it.
func (s *Service) proofStale(p *proof) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// prove makes one proof of contact.
func (s *Service) prove(p *proof) {
	defer s.bg.Done()
	_, p.err = s.c.Conn().Sync("/")
	s.proofMu.Lock()
	if p.err == nil && p.sent.After(s.proofAt) {
		s.proofAt = p.sent
	}
	if s.proofing == p {
		s.proofing = nil
	}
	s.proofMu.Unlock()
	close(p.done)
}

// trusted is how long after a proof of contact the service's holdings
// surely last: the client gives a lock up as lost (and its node may go)
// 0.8 of the session timeout after ZooKeeper last answered; 0.75 leaves
// room for the client's own clock checks.
func (s *Service) trusted() time.Duration { return s.cfg.SessionTimeout * 3 / 4 }

// coversTTL reports whether every lock l holds is trusted by the service's
// client until at least until (the keep-alive's arrival plus the TTL): the
// client presumes a lock lost, and may delete its node, once its leader's
// word on the session is too old (Lease.Deadline), which may come before
// the proof contactSince gives. It waits up to readBound for that word to
// move, and answers 503 and returns false if it does not.
func (s *Service) coversTTL(w http.ResponseWriter, r *http.Request, l *lease, until time.Time) bool {
	ctx, cancel := context.WithTimeout(r.Context(), readBound)
	defer cancel()
	s.mu.Lock()
	hs := l.inOrder()
	s.mu.Unlock()
	if s.trustedUntil(ctx, hs, until) {
		return true
	}
	writeError(w, http.StatusServiceUnavailable, "unreachable", "ZooKeeper's leader did not confirm the service's session for the lease's TTL: the lease is not extended; stop before its TTL has passed since your last acknowledged keep-alive was sent")
	return false
}

// trustedUntil waits until the client trusts every one of hs that is still
// held until at least until, or ctx ends (false). A lost holding is left to
// the answer's list, which says so.
func (s *Service) trustedUntil(ctx context.Context, hs []*holding, until time.Time) bool {
	for {
		short := false
		for _, h := range hs {
			if d := h.lease.Deadline(); !d.IsZero() && d.Before(until) && h.lease.Err() == nil {
				short = true
			}
		}
		if !short {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(25 * time.Millisecond): // the keep-alive proves contact about every 0.3 T
		}
	}
}

// acknowledge reports whether the service may acknowledge, at arrival, a
// grant or keep-alive of a lease of ttl: a proof of contact sent no earlier
// than trusted() less ttl before it, so that the caller's deadline (its
// sending plus ttl, before arrival plus ttl) comes before the service's
// client could give its locks up. It answers 503 and returns false otherwise.
func (s *Service) acknowledge(w http.ResponseWriter, r *http.Request, arrival time.Time, ttl time.Duration) bool {
	if !s.inContact(w) {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), readBound)
	defer cancel()
	if s.contactSince(ctx, arrival.Add(-(s.trusted() - ttl))) {
		return true
	}
	writeError(w, http.StatusServiceUnavailable, "unreachable", "ZooKeeper did not confirm the service's session: the lease is not extended; stop before its TTL has passed since your last acknowledged keep-alive was sent")
	return false
}
