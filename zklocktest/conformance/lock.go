package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zklock/zklock"
)

// acquireRelease: a lease's identity while held, and Release's answers.
func (s *suite) acquireRelease(t *testing.T) {
	p := s.path(t)
	l := s.mustAcquire(t, s.h.NewClient(t).NewMutex(t, p))
	if err := l.Err(); err != nil || isDone(l) {
		t.Fatalf("a fresh lease: Err %v, Done closed %v", err, isDone(l))
	}
	if !strings.HasPrefix(l.Node(), p+"/") {
		t.Fatalf("Node %q is not under %s", l.Node(), p)
	}
	if tok := token(t, l); token(t, l) != tok {
		t.Fatal("Token changed while held")
	}
	if parts := l.Parts(); len(parts) != 1 || parts[0] != l {
		t.Fatalf("Parts = %v, want the lease itself", parts)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	s.ended(t, l, zklock.ErrReleased, "released lease")
	if err := l.Release(context.Background()); !errors.Is(err, zklock.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
}

// tryAcquire: ErrLocked while held, the holder untouched; granted once free.
func (s *suite) tryAcquire(t *testing.T) {
	p := s.path(t)
	c1, c2 := s.h.NewClient(t), s.h.NewClient(t)
	h := s.mustAcquire(t, c1.NewMutex(t, p))
	m2 := c2.NewMutex(t, p)
	l, err := m2.TryAcquire(context.Background())
	if l != nil {
		t.Fatal("TryAcquire granted a held lock")
	}
	isOpError(t, err, "try-acquire", p, zklock.ErrLocked)
	if h.Err() != nil {
		t.Fatalf("the holder was disturbed: %v", h.Err())
	}
	s.waitContenders(t, c2, p, 1) // nothing left behind
	th := token(t, h)             // a token is a holder's: read it while held
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.waitContenders(t, c2, p, 0)
	l, err = m2.TryAcquire(context.Background())
	if err != nil {
		t.Fatalf("TryAcquire of a free lock: %v", err)
	}
	if token(t, l) <= th {
		t.Fatal("a later holder's token is not larger")
	}
	_ = l.Release(context.Background())
}

// fifo: waiters are served in the order they queued, one at a time, with
// growing sequences and tokens; Contenders lists them holder first.
func (s *suite) fifo(t *testing.T) {
	p := s.path(t)
	c := s.h.NewClient(t)
	h := s.mustAcquire(t, c.NewMutex(t, p))
	var waits []<-chan result
	for i := range 3 {
		waits = append(waits, s.queued(t, c, s.h.NewClient(t).NewMutex(t, p), p, i+2))
	}
	cs := s.waitContenders(t, c, p, 4)
	if !cs[0].Holder || cs[0].Node != h.Node() || cs[0].Sequence != h.Sequence() {
		t.Fatalf("first contender %+v is not the holder %s", cs[0], h.Node())
	}
	for i := 1; i < len(cs); i++ {
		if cs[i].Holder || cs[i].Sequence <= cs[i-1].Sequence {
			t.Fatalf("contender %d: %+v after %+v", i, cs[i], cs[i-1])
		}
	}
	prev, last := h, token(t, h)
	for i, w := range waits {
		for _, later := range waits[i:] {
			pending(t, later, "a waiter")
		}
		if err := prev.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		l := s.granted(t, w, "waiter")
		if l.Node() != cs[i+1].Node || token(t, l) <= last {
			t.Fatalf("waiter %d got %s (token %d), want %s after token %d", i, l.Node(), token(t, l), cs[i+1].Node, last)
		}
		prev, last = l, token(t, l)
	}
	_ = prev.Release(context.Background())
}

// deadline: Acquire ends at ctx's deadline with DeadlineExceeded, and its
// place in the queue is gone: the next waiter is served after the holder.
func (s *suite) deadline(t *testing.T) {
	s.gaveUp(t, context.DeadlineExceeded, func(ctx context.Context) (context.Context, func()) {
		return context.WithTimeout(ctx, s.h.GiveUp)
	})
}

// cancel: as deadline, for a cancelled ctx.
func (s *suite) cancel(t *testing.T) {
	s.gaveUp(t, context.Canceled, func(ctx context.Context) (context.Context, func()) {
		ctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(s.h.GiveUp, cancel)
		return ctx, cancel
	})
}

func (s *suite) gaveUp(t *testing.T, want error, bound func(context.Context) (context.Context, func())) {
	p := s.path(t)
	c := s.h.NewClient(t)
	h := s.mustAcquire(t, c.NewMutex(t, p))
	ctx, stop := bound(context.Background())
	defer stop()
	_, err := s.h.NewClient(t).NewMutex(t, p).Acquire(ctx)
	isOpError(t, err, "acquire", p, want)
	if cs := s.waitContenders(t, c, p, 1); cs[0].Node != h.Node() {
		t.Fatalf("contenders after the give-up: %+v", cs)
	}
	w := s.queued(t, c, s.h.NewClient(t).NewMutex(t, p), p, 2)
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = s.granted(t, w, "the waiter after the give-up").Release(context.Background())
}

// lose: a lease taken away ends with ErrLockLost, Release reports the loss
// once, and the next waiter holds with a larger token.
func (s *suite) lose(t *testing.T) {
	p := s.path(t)
	c := s.h.NewClient(t)
	h := s.mustAcquire(t, c.NewMutex(t, p))
	tok := token(t, h)
	w := s.queued(t, c, s.h.NewClient(t).NewMutex(t, p), p, 2)
	s.h.Lose(t, h)
	s.ended(t, h, zklock.ErrLockLost, "lost lease")
	l := s.granted(t, w, "the waiter after a loss")
	if token(t, l) <= tok {
		t.Fatal("the next holder's token is not larger than the lost one's")
	}
	releaseLost(t, h, zklock.ErrLockLost)
	_ = l.Release(context.Background())
}
