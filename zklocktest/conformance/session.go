package conformance

import (
	"context"
	"errors"
	"testing"

	"github.com/zklock/zklock"
)

// expire: a client's session expires while it holds p1 and waits on p2.
// Its lease ends with ErrLockLost before anyone else holds p1; its wait on
// p2 goes to the back, behind the waiter that queued after it.
func (s *suite) expire(t *testing.T) {
	p1, p2 := s.path(t), s.path(t)
	c1, c2, c3, c4 := s.h.NewClient(t), s.h.NewClient(t), s.h.NewClient(t), s.h.NewClient(t)
	h := s.mustAcquire(t, c1.NewMutex(t, p1))
	z := s.mustAcquire(t, c3.NewMutex(t, p2))
	w1 := s.queued(t, c2, c2.NewMutex(t, p1), p1, 2)
	back := s.queued(t, c3, c1.NewMutex(t, p2), p2, 2) // c1 waits on p2
	y := s.queued(t, c3, c4.NewMutex(t, p2), p2, 3)    // and c4 after it

	th := token(t, h) // a token is a holder's: read it while held
	s.h.Expire(t, c1, h)
	l1 := s.granted(t, w1, "the waiter on the expired holder's lock")
	if !isDone(h) {
		t.Fatal("the next holder was granted before the expired lease's Done closed")
	}
	s.ended(t, h, zklock.ErrLockLost, "expired lease")
	releaseLost(t, h, zklock.ErrLockLost)
	if token(t, l1) <= th {
		t.Fatal("the next holder's token is not larger than the expired one's")
	}

	if err := z.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	ly := s.granted(t, y, "the waiter behind the expired client's wait")
	pending(t, back, "the expired client's wait")
	ty := token(t, ly)
	if err := ly.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	lb := s.granted(t, back, "the expired client's re-queued wait")
	if token(t, lb) <= ty {
		t.Fatal("a re-queued waiter's token is not larger than those it went behind")
	}
	_ = lb.Release(context.Background())
	_ = l1.Release(context.Background())
}

// close: Close ends the client's leases with ErrClosed (Release then says
// ErrNotHeld), fails its waits and later calls with ErrClosed, and the
// next client in the queue holds.
func (s *suite) close(t *testing.T) {
	p := s.path(t)
	c1, c2 := s.h.NewClient(t), s.h.NewClient(t)
	m1 := c1.NewMutex(t, p)
	h := s.mustAcquire(t, m1)
	again := s.queued(t, c2, m1, p, 2) // not reentrant: it queues behind its own lease
	w := s.queued(t, c2, c2.NewMutex(t, p), p, 3)
	if err := c1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s.ended(t, h, zklock.ErrClosed, "lease of a closed client")
	if err := h.Release(context.Background()); !errors.Is(err, zklock.ErrNotHeld) {
		t.Fatalf("Release after Close = %v, want ErrNotHeld", err)
	}
	r := <-again
	isOpError(t, r.err, "acquire", p, zklock.ErrClosed)
	l := s.granted(t, w, "the waiter after a closed client")
	_, err := m1.Acquire(context.Background())
	if !errors.Is(err, zklock.ErrClosed) {
		t.Fatalf("Acquire on a closed client = %v, want ErrClosed", err)
	}
	_ = l.Release(context.Background())
}
