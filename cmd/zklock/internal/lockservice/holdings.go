package lockservice

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/zklock/zklock"
)

// holding is one granted lock of one caller's stream.
type holding struct {
	id, caller, path string
	exclusive        bool // holds alone: a mutex, a writer, a leader
	lease            *zklock.Lease
	cred             *credential // a stream's: the holding ends with it (a lease's holding ends with its lease)
	leased           bool        // a lease's: only the lease's routes release it (one owner per holding)
	weight           int         // a lease's: what it counts against --max-holds (k permits: k)

	releaseOnce sync.Once
	release     chan struct{} // closed by POST /v1/lock/release
	ended       chan struct{} // closed once the stream has said how it ended (or its caller is gone)
	endErr      error         // nil: released; else the loss. Valid once ended is closed
	described   LeaseHolding  // a lease's holding as its lease lists it (guarded by Service.mu)
}

func newHolding(id, caller, path string, exclusive bool, lease *zklock.Lease) *holding {
	return &holding{
		id: id, caller: caller, path: path, exclusive: exclusive, lease: lease,
		release: make(chan struct{}), ended: make(chan struct{}),
	}
}

// newID names one stream: 128 random bits, hex.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// maxLost bounds how many lost holdings the service remembers, so that
// their release answers 409 lost after their streams ended.
const maxLost = 4096

// rememberLost records that h ended by a loss.
func (s *Service) rememberLost(h *holding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !errors.Is(h.endErr, errTokenRemoved) { // a loss ZooKeeper may be behind: /healthz asks it again
		s.lossAt = time.Now()
	}
	s.lost[h.id] = h.caller
	s.lostFIFO = append(s.lostFIFO, h.id)
	if len(s.lostFIFO) > maxLost {
		delete(s.lost, s.lostFIFO[0])
		s.lostFIFO = slices.Delete(s.lostFIFO, 0, 1)
	}
}

// wasLost reports whether caller's holding id ended by a loss.
func (s *Service) wasLost(caller, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.lost[id]
	return ok && c == caller
}

func (h *holding) askRelease() { h.releaseOnce.Do(func() { close(h.release) }) }

// reserve counts n more lock nodes (a wait or holding: k permits are k)
// for caller; false when that would take the caller past Config.MaxHolds.
func (s *Service) reserve(caller string, n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perCall[caller]+n > s.cfg.MaxHolds {
		return false
	}
	s.perCall[caller] += n
	return true
}

func (s *Service) unreserve(caller string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perCall[caller] -= n; s.perCall[caller] <= 0 {
		delete(s.perCall, caller)
	}
}

// tooMany answers 429 for a request of n lock nodes past the caller's
// bound, or 400 for one that could never fit it.
func (s *Service) tooMany(w http.ResponseWriter, caller string, n int) {
	if n > s.cfg.MaxHolds {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("permits %d is more than the %d locks --max-holds lets a caller hold: the request could never be granted", n, s.cfg.MaxHolds))
		return
	}
	if n > 1 {
		writeError(w, http.StatusTooManyRequests, "too_many", fmt.Sprintf("caller %s may hold, wait for or watch %d locks at most, and k permits count k: this request for %d would take it past that", caller, s.cfg.MaxHolds, n))
		return
	}
	writeError(w, http.StatusTooManyRequests, "too_many", fmt.Sprintf("caller %s holds, waits for or watches %d locks already, the most this service allows", caller, s.cfg.MaxHolds))
}

// admitBound caps how long a grant waits for the stream of a holding that
// must have ended (its lease's Done closes at the latest by the loss bound,
// 0.8 of the session timeout) to say so.
const admitBound = 10 * time.Second

// leaseEnd is how the service reads a lease's end: a test stages a monitor
// that reports a deletion late through it.
type leaseEnd struct {
	done func(*zklock.Lease) <-chan struct{}
	err  func(*zklock.Lease) error
}

// leaseDone is l.Done() as the service sees it.
func (s *Service) leaseDone(l *zklock.Lease) <-chan struct{} {
	if e := s.staged.Load(); e != nil {
		return e.done(l)
	}
	return l.Done()
}

// leaseErr is l.Err() as the service sees it.
func (s *Service) leaseErr(l *zklock.Lease) error {
	if e := s.staged.Load(); e != nil {
		return e.err(l)
	}
	return l.Err()
}

// admit registers h, granted by ZooKeeper, once every holding of this
// service on the same path that h's grant shows to have ended has said so
// on its stream: so a caller whose lock was lost hears of it before another
// caller of this service is told it holds. Those are the holdings whose
// lease has ended; when either holds alone, all of them; and, for a shared
// grant (a reader, a semaphore's permits), those whose node is gone
// although their lease has not said so yet: the holder's deletion and the
// waiter's listing can come in one batch of events, and the waiter's grant
// be handled first. A listing sent after the grant, on the same session,
// sees at least what the grant saw. It waits at most admitBound, or until
// ctx ends (then false, h not registered).
func (s *Service) admit(ctx context.Context, h *holding) bool {
	s.mu.Lock()
	var wait, shared []*holding
	for o := range s.byPath[h.path] {
		switch {
		case h.exclusive || o.exclusive || s.leaseErr(o.lease) != nil:
			wait = append(wait, o)
		default:
			shared = append(shared, o)
		}
	}
	s.mu.Unlock()
	wait = append(wait, s.goneNodes(ctx, h.path, shared)...)
	bound := time.NewTimer(admitBound)
	defer bound.Stop()
wait:
	for _, o := range wait {
		select {
		case <-o.ended:
		case <-ctx.Done():
			return false
		case <-bound.C:
			s.log.Warn("granted while another holding of the path has not ended", "path", h.path, "other", o.id)
			break wait
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byPath[h.path] == nil {
		s.byPath[h.path] = map[*holding]struct{}{}
	}
	s.byPath[h.path][h] = struct{}{}
	s.byID[h.id] = h
	return true
}

// goneNodes returns the holdings among shared a node of which a listing of
// path no longer shows. It reads nothing when shared is empty; when the listing
// fails it returns those whose lease has ended by then (it cannot tell the
// others).
func (s *Service) goneNodes(ctx context.Context, path string, shared []*holding) []*holding {
	if len(shared) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, readBound)
	defer cancel()
	cs, err := s.c.Contenders(rctx, path)
	var gone []*holding
	if err != nil {
		s.log.Warn("cannot list the path before a grant", "path", path, "err", err)
		for _, o := range shared {
			if s.leaseErr(o.lease) != nil {
				gone = append(gone, o)
			}
		}
		return gone
	}
	present := make(map[string]bool, len(cs))
	for _, c := range cs {
		present[c.Node] = true
	}
	for _, o := range shared {
		for _, part := range o.lease.Parts() { // k permits: k nodes
			if !present[part.Node()] {
				gone = append(gone, o)
				break
			}
		}
	}
	return gone
}

func (s *Service) unregister(h *holding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, h.id)
	delete(s.byPath[h.path], h)
	if len(s.byPath[h.path]) == 0 {
		delete(s.byPath, h.path)
	}
}

// lookup returns caller's holding id, or nil.
func (s *Service) lookup(caller, id string) *holding {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.byID[id]; h != nil && h.caller == caller {
		return h
	}
	return nil
}
