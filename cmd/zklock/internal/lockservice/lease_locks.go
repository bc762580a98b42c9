package lockservice

// The locks a lease holds: taken (leaseAcquire), released by id, and kept
// until then (keep).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/zklock/zklock"
)

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
		writeEnded(w, l.id, e)
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
	req, timeout, ok := s.decodeLeaseAcquire(w, r)
	if !ok {
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
	weight := weight(areq)
	if !s.reserve(caller, weight) {
		s.tooMany(w, caller, weight)
		return
	}
	reserved := true
	defer func() {
		if reserved {
			s.unreserve(caller, weight)
		}
	}()
	// The wait, and the checks after the grant, end with the caller's
	// request, the lease, or the service.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(l.ctx, cancel)
	defer stop()
	owner := ownerName(r, caller, req.Owner, req.Host, req.PID) + " lease " + l.id[len(s.instance)+1:][:8]
	zl := s.leaseTake(ctx, w, l, lock, req.Try, timeout, owner)
	if zl == nil {
		return
	}
	h := newHolding(newID(), caller, req.Path, exclusive, zl)
	h.leased, h.weight = true, weight
	if !s.admit(ctx, h) {
		_ = zl.Release(context.Background()) // bounded by the loss, 0.8 T
		s.leaseEndedAnswer(w, l)
		return
	}
	tok, _ := zl.Token(ctx)
	h.described = LeaseHolding{ID: h.id, Path: req.Path, Kind: kindName(req.Kind), Node: zl.Node(), Token: tok}
	if !s.confirmLeaseGrant(ctx, w, l, h) || !s.keepInLease(ctx, w, l, h) {
		return
	}
	reserved = false // the holding's keep goroutine gives it back
	writeJSON(w, http.StatusOK, LeaseAcquireResponse{Granted: true, ID: h.id, Lease: l.id, Path: req.Path, Node: zl.Node(), Token: tok})
}

// decodeLeaseAcquire reads a lease's acquire and its timeout; false after
// answering 400. A wait needs a timeout of at most maxLeaseWait: its answer
// is one object, with nothing to keep a proxy from cutting a long wait.
func (s *Service) decodeLeaseAcquire(w http.ResponseWriter, r *http.Request) (LeaseAcquireRequest, time.Duration, bool) {
	var req LeaseAcquireRequest
	if !decode(w, r, &req) || !s.checkPath(w, req.Path) {
		return req, 0, false
	}
	timeout, ok := parseTimeout(w, req.Timeout, req.Try)
	if !ok {
		return req, 0, false
	}
	if !req.Try && (timeout == 0 || timeout > maxLeaseWait) {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("an acquire with a lease needs try, or a timeout of at most %v (its answer is one object, with nothing to keep a proxy from cutting a long wait)", maxLeaseWait))
		return req, 0, false
	}
	return req, timeout, true
}

// leaseTake takes lock as owner (at once with try), waiting while ctx lasts
// and at most timeout (0: no bound of its own); nil after answering why
// not: 410 if the lease ended meanwhile, else the acquire's failure.
func (s *Service) leaseTake(ctx context.Context, w http.ResponseWriter, l *lease, lock zklock.Locker, try bool, timeout time.Duration, owner string) *zklock.Lease {
	wait := ctx
	if timeout > 0 {
		var end context.CancelFunc
		wait, end = context.WithTimeout(ctx, timeout)
		defer end()
	}
	take := lock.Acquire
	if try {
		take = lock.TryAcquire
	}
	zl, err := take(zklock.ContextWithOwner(wait, owner))
	if err == nil {
		return zl
	}
	if !s.leaseEndedAnswer(w, l) {
		s.acquireFailed(w, err, ctx.Err() == nil && wait.Err() != nil)
	}
	return nil
}

// kindName is a request's kind as a holding lists it: mutex by default.
func kindName(kind string) string {
	if kind == "" {
		return "mutex"
	}
	return kind
}

// confirmLeaseGrant checks a granted holding before the caller hears of it:
// ZooKeeper's leader must confirm the service's session for as long as the
// lease's TTL promises, and the lock must not be lost already. False after
// releasing the lock and answering 503.
func (s *Service) confirmLeaseGrant(ctx context.Context, w http.ResponseWriter, l *lease, h *holding) bool {
	s.mu.Lock()
	until := l.deadline
	s.mu.Unlock()
	trustCtx, trustEnd := context.WithTimeout(ctx, readBound)
	trusted := s.trustedUntil(trustCtx, []*holding{h}, until)
	trustEnd()
	if !trusted {
		s.dropGrant(h)
		writeError(w, http.StatusServiceUnavailable, "unreachable", "ZooKeeper's leader did not confirm the service's session for as long as the lease's TTL promises: the lock was released; try again")
		return false
	}
	if err := s.leaseErr(h.lease); err != nil {
		// Lost as it was granted (the library hands out a lease it must
		// already presume lost, and deletes its node): answering granted
		// would let the caller work while another holds the lock.
		s.dropGrant(h)
		writeError(w, http.StatusServiceUnavailable, "unreachable", lostAtGrant(err))
		return false
	}
	return true
}

// keepInLease adds h to l's holdings and starts its keep goroutine, which
// from then on owns h's reservation; false after releasing the lock and
// answering 410 if the lease ended, or the caller left, as it was granted.
func (s *Service) keepInLease(ctx context.Context, w http.ResponseWriter, l *lease, h *holding) bool {
	s.mu.Lock()
	if l.ended != nil || ctx.Err() != nil {
		s.mu.Unlock()
		s.dropGrant(h)
		s.leaseEndedAnswer(w, l)
		return false
	}
	l.holdings[h.id] = h
	l.order = append(l.order, h.id)
	s.bg.Add(1)
	s.mu.Unlock()
	go s.keep(l, h)
	return true
}

// dropGrant undoes a grant the caller will not hear of: the service forgets
// the holding, and its lock is released.
func (s *Service) dropGrant(h *holding) {
	s.unregister(h)
	_ = h.lease.Release(context.Background())
}

// writeEnded answers 410 for lease id, ended as e says.
func writeEnded(w http.ResponseWriter, id string, e *leaseEnded) {
	writeError(w, http.StatusGone, e.code, "lease "+id+" has ended: "+e.reason)
}

// leaseEndedAnswer answers 410 and returns true if l has ended.
func (s *Service) leaseEndedAnswer(w http.ResponseWriter, l *lease) bool {
	s.mu.Lock()
	e := l.ended
	s.mu.Unlock()
	if e == nil {
		return false
	}
	writeEnded(w, l.id, e)
	return true
}

// keep watches one holding of a lease until it is released (by its id, or
// with the lease) or lost; it records how it ended before closing h.ended,
// so that the service grants the path to none of its other callers before
// a keep-alive would say the loss. A loss while the service's session is
// out of contact ends the whole lease.
func (s *Service) keep(l *lease, h *holding) {
	defer s.bg.Done()
	defer s.unreserve(h.caller, h.weight)
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
