package lockservice

import (
	"fmt"
	"sync"
	"time"

	"github.com/zklock/zklock"
)

// StageLateLoss makes s see the end of each of its leases only delay after
// the lease itself ended: a monitor that reports a node's deletion after
// the waiter's grant, which came in the same batch of events, was handled.
// Call it before the holdings it should apply to are granted.
func StageLateLoss(s *Service, delay time.Duration) {
	var late sync.Map // *zklock.Lease -> chan struct{}
	done := func(l *zklock.Lease) <-chan struct{} {
		ch := make(chan struct{})
		if got, loaded := late.LoadOrStore(l, ch); loaded {
			return got.(chan struct{})
		}
		go func() {
			<-l.Done()
			time.Sleep(delay)
			close(ch)
		}()
		return ch
	}
	s.staged.Store(&leaseEnd{done: done, err: func(l *zklock.Lease) error {
		select {
		case <-done(l):
			return l.Err()
		default:
			return nil
		}
	}})
}

// StretchLease sets the TTL of s's live lease id to ttl, as if it had been
// granted before a smaller grant of the session timeout lowered the bound.
func StretchLease(s *Service, id string, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases[id].ttl = ttl
}

// StageLostAtGrant makes s see every lease of its client as lost from its
// grant: what the client hands out when it must presume the lock lost as
// it is granted (its leader's word too old), deleting the node itself.
func StageLostAtGrant(s *Service) {
	lost := make(chan struct{})
	close(lost)
	s.staged.Store(&leaseEnd{
		done: func(*zklock.Lease) <-chan struct{} { return lost },
		err: func(*zklock.Lease) error {
			return fmt.Errorf("%w: no word from ZooKeeper's leader for longer than the session can be trusted", zklock.ErrLockLost)
		},
	})
}

// SetMaxEndedLeases sets how many ended leases of each caller a service
// remembers; the function returned restores it.
func SetMaxEndedLeases(n int) (restore func()) {
	old := maxEndedLeases
	maxEndedLeases = n
	return func() { maxEndedLeases = old }
}
