package lockservice

// What the service may promise a lease's caller: a proof of contact with
// ZooKeeper, and the service's client trusting every lock the lease holds
// until the caller's deadline (lease.go's comment gives the rule).

import (
	"context"
	"net/http"
	"time"
)

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
// room for the client's own clock checks. T is the timeout ZooKeeper
// granted, by which the client's loss clock goes.
func (s *Service) trusted() time.Duration { return s.c.SessionTimeout() * 3 / 4 }

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
