// Package conformance is the one suite that keeps package zklocktest
// honest: every behaviour the fake claims in its package doc is checked
// here, and Run is called both by zklocktest's tests (against the fake, in
// milliseconds) and by the root package's tests (against real ZooKeeper).
// A behaviour the fake models and this suite does not check is a bug of
// the suite.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zklock/zklock"
)

// Harness is what the suite needs of an implementation.
type Harness struct {
	// NewClient returns a new client: one session of its own, closed when
	// the test ends.
	NewClient func(t *testing.T) Client
	// Lose takes l away as someone deleting its node does, and returns
	// at once.
	Lose func(t *testing.T, l *zklock.Lease)
	// Expire expires the session of c, which holds l, and returns once the
	// server has ended it (l's lock may go to the next contender).
	Expire func(t *testing.T, c Client, l *zklock.Lease)
	// Wait bounds every wait for something that must happen (a grant, a
	// Done); 0 means 20 s.
	Wait time.Duration
	// GiveUp is how long an Acquire waits before its ctx ends, in the
	// checks of deadlines and cancels; 0 means 300 ms.
	GiveUp time.Duration
}

// Client is one session's primitives.
type Client interface {
	NewMutex(t *testing.T, path string) zklock.Locker
	NewElection(t *testing.T, path string) Election
	// Mutex and Election are the constructors as they are, errors
	// returned: NewMutex and NewElection of the client.
	Mutex(path string) (zklock.Locker, error)
	Election(path string) (Election, error)
	Contenders(ctx context.Context, path string) ([]zklock.Contender, error)
	Close() error
}

// Election is what zklock's Election and zklocktest's have in common.
type Election interface {
	Campaign(ctx context.Context, value string) (*zklock.Leadership, error)
	Leader(ctx context.Context) (zklock.Leader, error)
	Observe(ctx context.Context) <-chan zklock.Leader
}

// Run runs every check of the suite against h, each as a subtest.
func Run(t *testing.T, h Harness) {
	if h.Wait == 0 {
		h.Wait = 20 * time.Second
	}
	if h.GiveUp == 0 {
		h.GiveUp = 300 * time.Millisecond
	}
	s := &suite{h: h}
	for _, c := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"AcquireRelease", s.acquireRelease},
		{"TryAcquire", s.tryAcquire},
		{"FirstComeFirstServed", s.fifo},
		{"DeadlineLeavesNothing", s.deadline},
		{"CancelLeavesNothing", s.cancel},
		{"Lose", s.lose},
		{"Expire", s.expire},
		{"Close", s.close},
		{"Election", s.election},
		{"Observe", s.observe},
		{"Table", s.table},
	} {
		t.Run(c.name, c.fn)
	}
}

type suite struct{ h Harness }

var pathSeq atomic.Int64

// path returns a lock path no other check (and no earlier run) uses.
func (s *suite) path(t *testing.T) string {
	return fmt.Sprintf("/zklock-conformance/%d-%d/lock", time.Now().UnixNano(), pathSeq.Add(1))
}

// result is an Acquire's or a Campaign's outcome.
type result struct {
	l   *zklock.Lease
	err error
}

// acquireAsync starts Acquire and returns where its outcome will arrive.
func acquireAsync(ctx context.Context, l zklock.Locker) <-chan result {
	out := make(chan result, 1)
	go func() {
		lease, err := l.Acquire(ctx)
		out <- result{lease, err}
	}()
	return out
}

// queued starts an Acquire of l on path and returns once it is the n-th
// contender there, so the order of the queue is the order of the calls.
func (s *suite) queued(t *testing.T, c Client, l zklock.Locker, path string, n int) <-chan result {
	t.Helper()
	out := acquireAsync(context.Background(), l)
	s.waitContenders(t, c, path, n)
	return out
}

// waitContenders waits until path has exactly n contenders, and returns them.
func (s *suite) waitContenders(t *testing.T, c Client, path string, n int) []zklock.Contender {
	t.Helper()
	deadline := time.Now().Add(s.h.Wait)
	for {
		cs, err := c.Contenders(context.Background(), path)
		if err != nil {
			t.Fatalf("contenders of %s: %v", path, err)
		}
		if len(cs) == n {
			return cs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d contenders, want %d", path, len(cs), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// granted waits for an Acquire's outcome and requires a lease.
func (s *suite) granted(t *testing.T, ch <-chan result, who string) *zklock.Lease {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: acquire: %v", who, r.err)
		}
		return r.l
	case <-time.After(s.h.Wait):
		t.Fatalf("%s: not granted within %v", who, s.h.Wait)
	}
	return nil
}

// pending requires that an Acquire has not returned yet.
func pending(t *testing.T, ch <-chan result, who string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned early: lease %v, err %v", who, r.l != nil, r.err)
	default:
	}
}

// ended waits for l's Done and requires Err to match want.
func (s *suite) ended(t *testing.T, l *zklock.Lease, want error, who string) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(s.h.Wait):
		t.Fatalf("%s: Done not closed within %v", who, s.h.Wait)
	}
	if err := l.Err(); !errors.Is(err, want) {
		t.Fatalf("%s: Err = %v, want %v", who, err, want)
	}
}

// isDone reports a closed Done.
func isDone(l *zklock.Lease) bool {
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

// token returns l's fencing token, which must be positive.
func token(t *testing.T, l *zklock.Lease) int64 {
	t.Helper()
	tok, err := l.Token(context.Background())
	if err != nil || tok <= 0 {
		t.Fatalf("Token = %d, %v; want a positive token", tok, err)
	}
	return tok
}

// mustAcquire acquires l at once (nobody else is on its path).
func (s *suite) mustAcquire(t *testing.T, l zklock.Locker) *zklock.Lease {
	t.Helper()
	return s.granted(t, acquireAsync(context.Background(), l), "first acquire")
}

// isOpError requires err to be an *OpError naming op and path, matching want.
func isOpError(t *testing.T, err error, op, path string, want error) {
	t.Helper()
	var oe *zklock.OpError
	if !errors.As(err, &oe) || oe.Op != op || oe.Path != path {
		t.Fatalf("err = %v, want a *zklock.OpError for %s %s", err, op, path)
	}
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want it to match %v", err, want)
	}
}

// releaseLost requires the answers of Release on a lease that ended
// without one: the loss once, then ErrNotHeld.
func releaseLost(t *testing.T, l *zklock.Lease, want error) {
	t.Helper()
	if err := l.Release(context.Background()); !errors.Is(err, want) {
		t.Fatalf("first Release after the end = %v, want %v", err, want)
	}
	if err := l.Release(context.Background()); !errors.Is(err, zklock.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
}
