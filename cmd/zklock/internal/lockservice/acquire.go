package lockservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock"
)

// writeBound bounds each write to a stream: a caller that stops reading for
// that long is treated as gone, and its lock released.
const writeBound = 10 * time.Second

// grant is what a stream asks for: how to take the lock, and what to say.
type grant struct {
	path, owner string
	timeout     time.Duration
	exclusive   bool
	event       string // "granted" or "elected"
	take        func(ctx context.Context) (*zklock.Lease, error)
}

// acquire answers POST /v1/lock/acquire.
func (s *Service) acquire(w http.ResponseWriter, r *http.Request, caller string) {
	var req AcquireRequest
	if !decode(w, r, &req) || !s.checkPath(w, req.Path) {
		return
	}
	timeout, ok := parseTimeout(w, req.Timeout)
	if !ok {
		return
	}
	lock, exclusive, err := s.locker(req)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	take := lock.Acquire
	if req.Try {
		take = lock.TryAcquire
	}
	s.hold(w, r, caller, grant{path: req.Path, owner: req.Owner, timeout: timeout, exclusive: exclusive, event: "granted", take: take})
}

// locker builds the primitive a request asks for; exclusive: it holds alone.
func (s *Service) locker(req AcquireRequest) (zklock.Locker, bool, error) {
	if req.Kind != "semaphore" && req.Permits != 0 {
		return nil, false, fmt.Errorf("permits is for kind \"semaphore\", not %q", req.Kind)
	}
	switch req.Kind {
	case "", "mutex":
		m, err := s.c.NewMutex(req.Path)
		return m, true, err
	case "read", "write":
		rw, err := s.c.NewRWMutex(req.Path)
		if err != nil {
			return nil, false, err
		}
		if req.Kind == "read" {
			return rw.Reader(), false, nil
		}
		return rw.Writer(), true, nil
	case "semaphore":
		if req.Permits < 1 {
			return nil, false, errors.New("kind \"semaphore\" needs permits of at least 1")
		}
		sem, err := s.c.NewSemaphore(req.Path, req.Permits)
		return sem, false, err
	}
	return nil, false, fmt.Errorf("unknown kind %q: want mutex, read, write or semaphore", req.Kind)
}

// campaign answers POST /v1/election/campaign.
func (s *Service) campaign(w http.ResponseWriter, r *http.Request, caller string) {
	var req CampaignRequest
	if !decode(w, r, &req) || !s.checkPath(w, req.Path) {
		return
	}
	timeout, ok := parseTimeout(w, req.Timeout)
	if !ok {
		return
	}
	e, err := s.c.NewElection(req.Path)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	take := func(ctx context.Context) (*zklock.Lease, error) {
		ld, err := e.Campaign(ctx, req.Value)
		if err != nil {
			return nil, err
		}
		return ld.Lease(), nil
	}
	s.hold(w, r, caller, grant{path: req.Path, owner: req.Owner, timeout: timeout, exclusive: true, event: "elected", take: take})
}

// hold takes the lock for the caller and streams its holding until the
// caller releases it or goes away, or the lock is lost.
func (s *Service) hold(w http.ResponseWriter, r *http.Request, caller string, g grant) {
	if !s.reserve(caller) {
		writeError(w, http.StatusTooManyRequests, "too_many", fmt.Sprintf("caller %s holds or waits for %d locks already, the most this service allows", caller, s.cfg.MaxHolds))
		return
	}
	defer s.unreserve(caller)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel) // Close ends every stream
	defer stop()

	wait := ctx
	if g.timeout > 0 {
		var end context.CancelFunc
		wait, end = context.WithTimeout(ctx, g.timeout)
		defer end()
	}
	owner := g.owner
	if owner == "" {
		owner = caller
	}
	lease, err := g.take(zklock.ContextWithOwner(wait, owner))
	if err != nil {
		s.acquireFailed(w, err, ctx.Err() == nil && wait.Err() != nil)
		return
	}
	h := newHolding(caller, g.path, g.exclusive, lease)
	if !s.admit(ctx, h) {
		_ = lease.Release(context.Background()) // bounded by the loss, 0.8 T
		return
	}
	defer s.unregister(h)
	s.stream(ctx, w, h, g.event)
}

// stream writes the grant, then waits for the end of the holding and
// writes how it ended, then closes h.ended.
func (s *Service) stream(ctx context.Context, w http.ResponseWriter, h *holding, first string) {
	defer close(h.ended)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	tok, _ := h.lease.Token(ctx) // no I/O on a client made by Connect
	if !s.emit(w, Event{Event: first, ID: h.id, Path: h.path, Node: h.lease.Node(), Token: tok}) {
		h.endErr = s.releaseLease(h)
		return
	}
	select {
	case <-h.lease.Done():
		h.endErr = h.lease.Err()
	case <-h.release:
		h.endErr = s.releaseLease(h)
	case <-ctx.Done(): // the caller went away, or the service is closing
		h.endErr = s.releaseLease(h)
		if s.ctx.Err() == nil {
			return
		}
	}
	ev := Event{Event: "released", ID: h.id, Path: h.path}
	if h.endErr != nil {
		ev.Event, ev.Reason = "lost", reason(h.endErr)
	} else if s.ctx.Err() != nil {
		ev.Reason = "the service is stopping"
	}
	s.emit(w, ev)
}

// releaseLease releases h's lease; nil, or the loss it found. It returns
// within one ZooKeeper round trip, or by the loss bound (0.8 of the session
// timeout) when ZooKeeper does not answer.
func (s *Service) releaseLease(h *holding) error {
	err := h.lease.Release(context.Background())
	if errors.Is(err, zklock.ErrLockLost) || errors.Is(err, zklock.ErrHoldLimit) || errors.Is(err, zklock.ErrClosed) {
		return err
	}
	if err != nil {
		s.log.Warn("release failed", "path", h.path, "node", h.lease.Node(), "err", err)
		return err
	}
	return nil
}

// emit writes one event line, numbered, and flushes it; false if the caller
// cannot be written to within writeBound.
func (s *Service) emit(w http.ResponseWriter, ev Event) bool {
	ev.Seq = s.seq.Add(1)
	b, _ := json.Marshal(ev)
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(writeBound))
	if _, err := w.Write(append(b, '\n')); err != nil {
		return false
	}
	return rc.Flush() == nil
}

// reason is a loss as the stream says it.
func reason(err error) string {
	switch {
	case errors.Is(err, zk.ErrSessionExpired):
		return "session expired: " + err.Error()
	case errors.Is(err, zklock.ErrClosed):
		return "the service's ZooKeeper client closed"
	}
	return err.Error()
}

// acquireFailed answers a failed acquire; timedOut: the request's timeout
// passed.
func (s *Service) acquireFailed(w http.ResponseWriter, err error, timedOut bool) {
	switch {
	case errors.Is(err, zklock.ErrUnreachable):
		writeError(w, http.StatusServiceUnavailable, "unreachable", err.Error())
	case errors.Is(err, zklock.ErrLocked):
		writeError(w, http.StatusConflict, "locked", err.Error())
	case timedOut:
		writeError(w, http.StatusRequestTimeout, "timeout", "timeout passed while others held the lock: "+err.Error())
	case errors.Is(err, zklock.ErrIncompatible), errors.Is(err, zklock.ErrLimitMismatch):
		writeError(w, http.StatusConflict, "incompatible", err.Error())
	case errors.Is(err, zk.ErrNoAuth):
		writeError(w, http.StatusForbidden, "zookeeper_refused", err.Error())
	case s.ctx.Err() != nil:
		writeError(w, http.StatusServiceUnavailable, "closing", "the service is stopping")
	default:
		writeError(w, http.StatusInternalServerError, "failed", err.Error())
	}
}
