package lockservice

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

	releaseOnce sync.Once
	release     chan struct{} // closed by POST /v1/lock/release
	ended       chan struct{} // closed once the stream has said how it ended (or its caller is gone)
	endErr      error         // nil: released; else the loss. Valid once ended is closed
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

// reserve counts one more wait or holding for caller; false when the caller
// has Config.MaxHolds already.
func (s *Service) reserve(caller string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perCall[caller] >= s.cfg.MaxHolds {
		return false
	}
	s.perCall[caller]++
	return true
}

func (s *Service) unreserve(caller string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perCall[caller]--; s.perCall[caller] <= 0 {
		delete(s.perCall, caller)
	}
}

// admitBound caps how long a grant waits for the stream of a holding that
// must have ended (its lease's Done closes at the latest by the loss bound,
// 0.8 of the session timeout) to say so.
const admitBound = 10 * time.Second

// admit registers h, granted by ZooKeeper, once every holding of this
// service on the same path that h's grant shows to have ended has said so
// on its stream: so a caller whose lock was lost hears of it before another
// caller of this service is told it holds. Those are the holdings whose
// lease has ended, and, when either holds alone, all of them. It waits at
// most admitBound, or until ctx ends (then false, h not registered).
func (s *Service) admit(ctx context.Context, h *holding) bool {
	s.mu.Lock()
	var wait []*holding
	for o := range s.byPath[h.path] {
		if h.exclusive || o.exclusive || o.lease.Err() != nil {
			wait = append(wait, o)
		}
	}
	s.mu.Unlock()
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
