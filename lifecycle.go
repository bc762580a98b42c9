package zklock

import (
	"context"
	"fmt"
	"sync"
)

// lifecycle is what Close ends and waits for: the closing signal, the leases
// still held, and the goroutines and calls in flight. Client embeds it; no
// other state of the client is guarded by its lock.
type lifecycle struct {
	closing chan struct{}  // closed by Close
	wg      sync.WaitGroup // zklock goroutines and calls Close waits for

	mu      sync.Mutex // guards closing's transition and the two fields below
	leases  map[heldLease]struct{}
	drained bool // Close has released the leases: no new release goroutines
}

// heldLease is what the client needs of a lease it holds (lease.go): to
// presume it lost with the session, and to release it on Close.
type heldLease interface {
	presumeLost()
	releaseOnClose(ctx context.Context)
}

func newLifecycle() lifecycle {
	return lifecycle{closing: make(chan struct{}), leases: make(map[heldLease]struct{})}
}

func (lc *lifecycle) isClosed() bool { return isDone(lc.closing) }

// track registers one more zklock goroutine or call that Close must wait
// for; false once the client is closing.
func (lc *lifecycle) track() bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.isClosed() {
		return false
	}
	lc.wg.Add(1)
	return true
}

// spawn runs fn on a goroutine Close waits for; false once Close began.
func (lc *lifecycle) spawn(fn func()) bool {
	if !lc.track() {
		return false
	}
	go func() {
		defer lc.wg.Done()
		fn()
	}()
	return true
}

// trackRelease is track for a lease's release, which Close itself makes:
// it succeeds until Close has finished releasing.
func (lc *lifecycle) trackRelease() bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.drained {
		return false
	}
	lc.wg.Add(1)
	return true
}

// register records a held lease, and its monitor as a goroutine Close waits
// for; false once the client is closing.
func (lc *lifecycle) register(l heldLease) bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.isClosed() {
		return false
	}
	lc.leases[l] = struct{}{}
	lc.wg.Add(1)
	return true
}

// forget removes a lease that ended.
func (lc *lifecycle) forget(l heldLease) {
	lc.mu.Lock()
	delete(lc.leases, l)
	lc.mu.Unlock()
}

// presumeLeasesLost marks every held lease presumed lost (the session may
// be gone).
func (lc *lifecycle) presumeLeasesLost() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for l := range lc.leases {
		l.presumeLost()
	}
}

// beginClose closes closing and returns the leases held at that moment:
// none can be added after.
func (lc *lifecycle) beginClose() []heldLease {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	close(lc.closing)
	leases := make([]heldLease, 0, len(lc.leases))
	for l := range lc.leases {
		leases = append(leases, l)
	}
	return leases
}

// drain ends the releases Close makes: trackRelease fails from now on.
func (lc *lifecycle) drain() {
	lc.mu.Lock()
	lc.drained = true
	lc.mu.Unlock()
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ctxCause is ctx's error, with its cause when one was given.
func ctxCause(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("%w (%w)", ctx.Err(), cause)
	}
	return ctx.Err()
}
