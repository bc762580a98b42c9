package lockservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/zklock/zklock"
)

// readBound bounds a status or leader read; the library bounds it by the
// session timeout as well.
const readBound = 10 * time.Second

// release answers POST /v1/lock/release: it ends the caller's holding id,
// within one ZooKeeper round trip (the loss bound, 0.8 T, at worst).
func (s *Service) release(w http.ResponseWriter, r *http.Request, caller string) {
	var req ReleaseRequest
	if !decode(w, r, &req) {
		return
	}
	h := s.lookup(caller, req.ID)
	if h == nil && s.wasLost(caller, req.ID) {
		writeError(w, http.StatusConflict, "lost", fmt.Sprintf("holding %q was lost before the release; its stream said why", req.ID))
		return
	}
	if h == nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no holding %q of this caller (released, lost, or never granted)", req.ID))
		return
	}
	if h.leased { // its lease must hear of its end: only the lease's routes release it
		writeError(w, http.StatusConflict, "lease_holding", fmt.Sprintf("holding %q belongs to a lease: release it with /v1/lease/release (the lease's id and this id); nothing was changed", req.ID))
		return
	}
	h.askRelease()
	select {
	case <-h.ended:
	case <-r.Context().Done():
		return
	}
	if h.endErr != nil {
		writeError(w, http.StatusConflict, "lost", "the lock was lost before the release: "+reason(h.endErr))
		return
	}
	writeJSON(w, http.StatusOK, ReleaseResponse{ID: h.id, Released: true})
}

// pathQuery reads the path query parameter; false after answering.
func (s *Service) pathQuery(w http.ResponseWriter, r *http.Request) (string, bool) {
	p := r.URL.Query().Get("path")
	if p == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "missing the path query parameter (?path=/locks/name)")
		return "", false
	}
	return p, s.checkPath(w, p)
}

// status answers GET /v1/lock/status?path=P: the queue, holders first.
func (s *Service) status(w http.ResponseWriter, r *http.Request, _ string) {
	p, ok := s.pathQuery(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readBound)
	defer cancel()
	cs, err := s.c.Contenders(ctx, p)
	if err != nil {
		s.readFailed(w, err)
		return
	}
	out := StatusResponse{Path: p, Contenders: []Contender{}}
	for _, c := range cs {
		out.Contenders = append(out.Contenders, contenderOf(c))
	}
	writeJSON(w, http.StatusOK, out)
}

// leader answers GET /v1/election/leader?path=P: 200 naming the leader, 404
// when nobody leads.
func (s *Service) leader(w http.ResponseWriter, r *http.Request, _ string) {
	p, e, ok := s.electionQuery(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readBound)
	defer cancel()
	l, err := e.Leader(ctx)
	if errors.Is(err, zklock.ErrNoLeader) {
		writeError(w, http.StatusNotFound, "no_leader", err.Error())
		return
	}
	if err != nil {
		s.readFailed(w, err)
		return
	}
	writeJSON(w, http.StatusOK, leaderOf(p, l))
}

// watch answers GET /v1/election/watch?path=P with server-sent events: an
// event "leader" with the leader now, then one at every change (an empty
// node while nobody leads), and a comment every heartbeat interval, until
// the caller leaves. A watch counts against the caller's --max-holds.
func (s *Service) watch(w http.ResponseWriter, r *http.Request, caller string) {
	p, e, ok := s.electionQuery(w, r)
	if !ok {
		return
	}
	if !s.reserve(caller, 1) {
		s.tooMany(w, caller, 1)
		return
	}
	defer s.unreserve(caller, 1)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	cred := credOf(r)
	stopCred := context.AfterFunc(cred.ctx, cancel) // a reload removed the caller's token
	defer stopCred()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.Header().Set(HeartbeatHeader, s.cfg.Heartbeat.String())
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	write := func(format string, args ...any) {
		_ = rc.SetWriteDeadline(time.Now().Add(writeBound))
		if _, err := fmt.Fprintf(w, format, args...); err != nil || rc.Flush() != nil {
			cancel() // Observe closes its channel once ctx has ended
		}
	}
	tick := time.NewTicker(s.cfg.Heartbeat)
	defer tick.Stop()
	leaders := e.Observe(ctx)
	for {
		select {
		case l, ok := <-leaders:
			if !ok {
				if cred.removed() {
					write(": the caller's token was removed from the service's --token-file\n\n")
				}
				return
			}
			b, _ := json.Marshal(leaderOf(p, l))
			write("event: leader\ndata: %s\n\n", b)
		case <-tick.C:
			write(": heartbeat\n\n")
		}
	}
}

// health answers GET /healthz: 200 while the service's locks hold and its
// session is in contact with ZooKeeper, else 503. While it holds locks, the
// signal is their leases' Deadline: once the earliest has passed, the
// library presumes them lost (ZooKeeper's leader has not been heard from
// for too long), whatever the connection state says; "locks" says
// "presumed_lost" then. After a holding was lost, it stays 503 with that
// until ZooKeeper answers a round trip sent since (one sync, at most
// healthProof). With nothing held, the connection state is what there is.
func (s *Service) health(w http.ResponseWriter, r *http.Request, _ string) {
	st := s.c.State()
	resp := HealthResponse{Session: st.String()}
	switch st {
	case zklock.StateConnected, zklock.StateReconnected:
		resp.OK = true
	}
	if resp.OK && s.locksPresumedLost(r.Context()) {
		resp.OK, resp.Locks = false, "presumed_lost"
	}
	code := http.StatusOK
	if !resp.OK {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, resp)
}

// healthProof bounds the round trip /healthz makes after a loss.
const healthProof = time.Second

// locksPresumedLost reports whether a lock the service holds has passed its
// lease's Deadline, or a holding was lost and ZooKeeper has not answered
// since.
func (s *Service) locksPresumedLost(ctx context.Context) bool {
	now := time.Now()
	s.mu.Lock()
	lossAt := s.lossAt
	var hs []*holding
	for _, h := range s.byID {
		hs = append(hs, h)
	}
	for _, l := range s.leases {
		for _, h := range l.holdings {
			hs = append(hs, h)
		}
	}
	s.mu.Unlock()
	for _, h := range hs {
		if d := h.lease.Deadline(); !d.IsZero() && !now.Before(d) {
			return true
		}
	}
	if lossAt.IsZero() {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, healthProof)
	defer cancel()
	return !s.contactSince(ctx, lossAt)
}

// readFailed answers a failed read.
func (s *Service) readFailed(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, zklock.ErrUnreachable), errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, "unreachable", err.Error())
	case errors.Is(err, zklock.ErrInvalidPath):
		writeError(w, http.StatusBadRequest, "bad_path", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "failed", err.Error())
	}
}

// electionQuery reads the path query and makes its election, or answers
// the error and returns false.
func (s *Service) electionQuery(w http.ResponseWriter, r *http.Request) (string, *zklock.Election, bool) {
	p, ok := s.pathQuery(w, r)
	if !ok {
		return "", nil, false
	}
	e, err := s.c.NewElection(p)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_path", err.Error())
		return "", nil, false
	}
	return p, e, true
}
