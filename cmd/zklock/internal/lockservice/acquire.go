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

// writeBound bounds each write to a stream: a caller that stops reading for
// that long is treated as gone, and its lock released.
const writeBound = 10 * time.Second

// grant is what a stream asks for: how to take the lock, and what to say.
type grant struct {
	path, owner string
	timeout     time.Duration
	exclusive   bool
	try         bool        // answer at once: the status says whether it was granted
	event       string      // "granted" or "elected"
	cred        *credential // the caller's: a reload that removes it ends the stream
	take        func(ctx context.Context) (*zklock.Lease, error)
	weight      int // what it counts against --max-holds: k for k permits, else 1
}

// acquire answers POST /v1/lock/acquire.
func (s *Service) acquire(w http.ResponseWriter, r *http.Request, caller string) {
	var req AcquireRequest
	if !decode(w, r, &req) || !s.checkPath(w, req.Path) {
		return
	}
	timeout, ok := parseTimeout(w, req.Timeout, req.Try)
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
	owner := ownerName(r, caller, req.Owner, req.Host, req.PID)
	s.hold(w, r, caller, grant{path: req.Path, owner: owner, timeout: timeout, exclusive: exclusive, try: req.Try, event: "granted", take: take, cred: credOf(r), weight: weight(req)})
}

// locker builds the primitive a request asks for; exclusive: it holds alone.
func (s *Service) locker(req AcquireRequest) (zklock.Locker, bool, error) {
	if req.Kind != "semaphore" && (req.Limit != 0 || req.Permits != 0) {
		return nil, false, fmt.Errorf("limit and permits are for kind \"semaphore\", not %q", req.Kind)
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
		k := req.Permits
		if k == 0 {
			k = 1
		}
		switch {
		case req.Limit < 1:
			return nil, false, errors.New("kind \"semaphore\" needs limit, its number of permits N (at least 1); permits is how many of them to take, k (default 1), as zklock exec's --semaphore N --permits k")
		case req.Limit > maxLimit:
			return nil, false, fmt.Errorf("limit %d is above the service's bound of %d permits (each permit is a node, and each waiter lists them all)", req.Limit, maxLimit)
		case k < 1 || k > req.Limit:
			return nil, false, fmt.Errorf("permits %d is not between 1 and the limit %d", req.Permits, req.Limit)
		}
		sem, err := s.c.NewSemaphore(req.Path, req.Limit)
		if err != nil {
			return nil, false, err
		}
		if k > 1 {
			return permits{sem, k}, false, nil
		}
		return sem, false, nil
	}
	return nil, false, fmt.Errorf("unknown kind %q: want mutex, read, write or semaphore", req.Kind)
}

// maxLimit bounds a semaphore's limit through the service.
const maxLimit = 1000

// weight is what a request counts against --max-holds: k permits are k
// lock nodes, each a full acquire.
func weight(req AcquireRequest) int {
	if req.Kind == "semaphore" && req.Permits > 1 {
		return req.Permits
	}
	return 1
}

// permits is k permits of a semaphore as one lock.
type permits struct {
	s *zklock.Semaphore
	k int
}

func (p permits) Acquire(ctx context.Context) (*zklock.Lease, error) { return p.s.AcquireN(ctx, p.k) }

func (p permits) TryAcquire(ctx context.Context) (*zklock.Lease, error) {
	return p.s.TryAcquireN(ctx, p.k)
}

// campaign answers POST /v1/election/campaign.
func (s *Service) campaign(w http.ResponseWriter, r *http.Request, caller string) {
	var req CampaignRequest
	if !decode(w, r, &req) || !s.checkPath(w, req.Path) {
		return
	}
	timeout, ok := parseTimeout(w, req.Timeout, false)
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
	owner := ownerName(r, caller, req.Owner, req.Host, req.PID)
	s.hold(w, r, caller, grant{path: req.Path, owner: owner, timeout: timeout, exclusive: true, event: "elected", take: take, cred: credOf(r), weight: 1})
}

// hold takes the lock for the caller and streams its holding until the
// caller releases it or goes away, or the lock is lost. A try is answered
// with its outcome's status; a wait is answered 200 at once, and its
// stream says "heartbeat" while it waits, then "granted" or "failed".
func (s *Service) hold(w http.ResponseWriter, r *http.Request, caller string, g grant) {
	if !s.reserve(caller, g.weight) {
		s.tooMany(w, caller, g.weight)
		return
	}
	defer s.unreserve(caller, g.weight)
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
	id := newID()
	var lease *zklock.Lease
	if g.try {
		var err error
		if lease, err = g.take(zklock.ContextWithOwner(wait, g.owner)); err != nil {
			s.acquireFailed(w, err, ctx.Err() == nil && wait.Err() != nil)
			return
		}
		startStream(w, s.cfg.Heartbeat)
	} else {
		startStream(w, s.cfg.Heartbeat)
		if lease = s.waitFor(ctx, wait, w, id, g); lease == nil {
			return
		}
	}
	h := newHolding(id, caller, g.path, g.exclusive, lease)
	h.cred = g.cred
	if !s.admit(ctx, h) {
		_ = lease.Release(context.Background()) // bounded by the loss, 0.8 T
		return
	}
	defer s.unregister(h)
	s.stream(ctx, w, h, g.event)
}

// startStream sends a stream's headers at once, so that a client or proxy
// that times out waiting for them does not give up on a waiter.
func startStream(w http.ResponseWriter, heartbeat time.Duration) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // nginx: pass each line on as it comes
	w.Header().Set(HeartbeatHeader, heartbeat.String())
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()
}

// HeartbeatHeader names the response header that gives a stream's
// heartbeat interval (a Go duration): a client that hears nothing for a few
// intervals knows the service or the network is gone.
const HeartbeatHeader = "Zklock-Heartbeat"

// waitFor takes the lock while writing a heartbeat line every interval;
// the lease, or nil after writing the failure (or finding the caller gone:
// then nothing is held). ctx is the stream's, wait the request's timeout.
func (s *Service) waitFor(ctx, wait context.Context, w http.ResponseWriter, id string, g grant) *zklock.Lease {
	type result struct {
		lease *zklock.Lease
		err   error
	}
	wait, gone := context.WithCancel(wait)
	defer gone()
	done := make(chan result, 1)
	go func() {
		l, err := g.take(zklock.ContextWithOwner(wait, g.owner))
		done <- result{l, err}
	}()
	tick := time.NewTicker(s.cfg.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case res := <-done:
			if res.err == nil && g.cred.ctx.Err() != nil {
				// Granted as a reload removed the caller's token (the holder
				// ahead released for that very reason, and this goroutine was
				// not scheduled in between): the token's end comes first.
				_ = res.lease.Release(context.Background())
				s.emit(w, Event{Event: "failed", ID: id, Path: g.path, Code: "failed", Reason: errTokenRemoved.Error()})
				return nil
			}
			if res.err == nil {
				return res.lease
			}
			_, code, msg := s.failure(res.err, ctx.Err() == nil && wait.Err() != nil)
			s.emit(w, Event{Event: "failed", ID: id, Path: g.path, Code: code, Reason: msg})
			return nil
		case <-tick.C:
			if !s.emit(w, Event{Event: "heartbeat", ID: id, Path: g.path}) {
				gone() // the caller is gone: give up the wait
				if res := <-done; res.err == nil {
					_ = res.lease.Release(context.Background()) // bounded by the loss, 0.8 T
				}
				return nil
			}
		case <-g.cred.ctx.Done(): // a reload removed the caller's token: give up the wait
			gone()
			if res := <-done; res.err == nil {
				_ = res.lease.Release(context.Background())
			}
			s.emit(w, Event{Event: "failed", ID: id, Path: g.path, Code: "failed", Reason: errTokenRemoved.Error()})
			return nil
		}
	}
}

// stream writes the grant, then a heartbeat every interval until the
// holding ends, then how it ended; then it closes h.ended.
func (s *Service) stream(ctx context.Context, w http.ResponseWriter, h *holding, first string) {
	defer close(h.ended)
	if !s.sayGranted(ctx, w, h, first) {
		return
	}
	tick := time.NewTicker(s.cfg.Heartbeat)
	defer tick.Stop()
wait:
	for {
		select {
		case <-s.leaseDone(h.lease):
			h.endErr = s.leaseErr(h.lease)
			break wait
		case <-h.release:
			h.endErr = s.releaseLease(h)
			break wait
		case <-ctx.Done(): // the caller went away, or the service is closing
			h.endErr = s.releaseLease(h)
			if s.ctx.Err() == nil {
				s.endedBy(h)
				return
			}
			break wait
		case <-tick.C:
			if !s.emit(w, Event{Event: "heartbeat", ID: h.id, Path: h.path}) { // the caller is gone
				h.endErr = s.releaseLease(h)
				s.endedBy(h)
				return
			}
		case <-h.cred.ctx.Done():
			// A reload removed the caller's token: the stream says the loss
			// before the lock is released, so before anyone else can be
			// granted it.
			h.endErr = errTokenRemoved
			s.emit(w, Event{Event: "lost", ID: h.id, Path: h.path, Reason: errTokenRemoved.Error() + "; the lock is released"})
			_ = s.releaseLease(h)
			s.endedBy(h)
			return
		}
	}
	s.endedBy(h)
	s.sayEnded(w, h)
}

// sayGranted writes the grant's line (first: "granted" or "elected"); false
// after ending h, when it was lost as it was granted (the stream then says
// failed, never granted) or the caller cannot be written to.
func (s *Service) sayGranted(ctx context.Context, w http.ResponseWriter, h *holding, first string) bool {
	if err := s.leaseErr(h.lease); err != nil {
		h.endErr = err
		s.emit(w, Event{Event: "failed", ID: h.id, Path: h.path, Code: "unreachable", Reason: lostAtGrant(err)})
		_ = s.releaseLease(h)
		return false
	}
	tok, _ := h.lease.Token(ctx) // no I/O on a client made by Connect
	if !s.emit(w, Event{Event: first, ID: h.id, Path: h.path, Node: h.lease.Node(), Token: tok}) {
		h.endErr = s.releaseLease(h)
		return false
	}
	return true
}

// sayEnded writes the stream's last line once h has ended: released, or
// lost and why.
func (s *Service) sayEnded(w http.ResponseWriter, h *holding) {
	ev := Event{Event: "released", ID: h.id, Path: h.path}
	if h.endErr != nil {
		ev.Event, ev.Reason = "lost", reason(h.endErr)
	} else if s.ctx.Err() != nil {
		ev.Reason = "the service is stopping"
	}
	s.emit(w, ev)
	if h.endErr != nil && len(h.lease.Parts()) > 1 {
		// k permits are k nodes: one lost, the others still hold permits
		// until released (bounded by the loss bound, 0.8 T).
		_ = h.lease.Release(context.Background())
	}
}

// endedBy remembers h when it ended by a loss.
func (s *Service) endedBy(h *holding) {
	if h.endErr != nil {
		s.rememberLost(h)
	}
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
