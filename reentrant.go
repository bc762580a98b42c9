package zklock

import (
	"context"
	"fmt"
	"math"

	"github.com/zklock/zklock/internal/lockpath"
)

// ReentrantMutex is a fair lock that its owner may take again while holding
// it: nested Acquires by the same owner return at once with no ZooKeeper
// request, and only the last matching Release deletes the node.
//
// The owner is, by default, the calling goroutine within this Client: the
// client's random id plus the goroutine's number, so two clients (or two
// processes) that happen to run a goroutine with the same number never
// re-enter each other's lock. A context made with ContextWithOwner names the owner
// explicitly instead; every Acquire and Release carrying that id through this
// Client is the same owner, whatever goroutine makes it. Another owner in the
// same client queues like any other contender. Holds are counted per Client
// and path, so two ReentrantMutex values on one path share them.
type ReentrantMutex struct {
	c    *Client
	path string
}

// NewReentrantMutex returns a ReentrantMutex on path. It checks the path and
// does no I/O.
func (c *Client) NewReentrantMutex(path string) (*ReentrantMutex, error) {
	if err := validatePath(path); err != nil {
		return nil, err
	}
	return &ReentrantMutex{c: c, path: path}, nil
}

// Path returns the lock path.
func (r *ReentrantMutex) Path() string { return r.path }

// Acquire takes the lock for the caller's owner (see ReentrantMutex), or adds
// one to its hold count if it already holds it. A nested Acquire on a lease
// that has been lost returns the loss error: the outer critical section is no
// longer protected. Otherwise it behaves like Mutex.Acquire.
func (r *ReentrantMutex) Acquire(ctx context.Context) (*Lease, error) {
	return opError("acquire", r.path)(r.acquire(ctx, false))
}

// TryAcquire is Acquire that never waits for the lock: an owner that holds
// it re-enters at once; otherwise it takes the lock only if nobody holds it
// or waits ahead, and returns ErrLocked, leaving nothing behind, if not (also
// while the same owner's first Acquire is still queueing elsewhere). Like
// Mutex.TryAcquire, it waits for ZooKeeper at most ctx or the session timeout.
func (r *ReentrantMutex) TryAcquire(ctx context.Context) (*Lease, error) {
	return opError("try-acquire", r.path)(r.acquire(ctx, true))
}

func (r *ReentrantMutex) acquire(ctx context.Context, try bool) (*Lease, error) {
	explicit, g := ownerID(ctx)
	key := holdKey(explicit, g)
	for {
		next, err := r.claim(key)
		switch {
		case err != nil:
			return nil, err
		case next.wait != nil && try && next.queueing:
			return nil, fmt.Errorf("%w: %s is being queued for by the same owner", ErrLocked, r.path)
		case next.wait != nil:
			select {
			case <-next.wait:
				continue
			case <-ctx.Done():
				return nil, r.c.ctxErr(ctx)
			}
		case next.nested != nil:
			return r.checkNested(key, next.nested)
		}
		return r.first(ctx, key, next.fresh, explicit, g, try)
	}
}

// reentry is what an Acquire does next: wait and look again, use a hold it
// re-entered, or queue for the lock with a fresh hold.
type reentry struct {
	wait     <-chan struct{}
	queueing bool // wait is the same owner's first Acquire, not a Release
	nested   *ownerHold
	fresh    *ownerHold
}

// claim looks at the owner's hold on the path, under the client's lock.
func (r *ReentrantMutex) claim(key string) (reentry, error) {
	c := r.c
	c.holds.mu.Lock()
	defer c.holds.mu.Unlock()
	if c.isClosed() {
		return reentry{}, ErrClosed
	}
	holds := c.holds.byPath[r.path]
	if holds == nil {
		holds = make(map[string]*ownerHold)
		c.holds.byPath[r.path] = holds
	}
	h := holds[key]
	switch {
	case h == nil:
		h = &ownerHold{ready: make(chan struct{})}
		holds[key] = h
		return reentry{fresh: h}, nil
	case !isDone(h.ready):
		// The same owner is already queueing from elsewhere: wait for it
		// rather than queueing behind ourselves.
		return reentry{wait: h.ready, queueing: true}, nil
	case h.releasing != nil:
		// The last hold is being released: wait, then queue afresh (or
		// take the hold back if the delete failed).
		return reentry{wait: h.releasing}, nil
	case h.count == math.MaxInt32:
		return reentry{}, fmt.Errorf("zklock: %s held %d times by one owner: too many re-entries", r.path, h.count)
	}
	h.count++
	return reentry{nested: h}, nil
}

// checkNested returns the re-entered lease, or, if it has been lost, undoes
// the re-entry and returns the loss. Err runs outside the client's lock: it
// may end the lease, which takes that lock.
func (r *ReentrantMutex) checkNested(key string, h *ownerHold) (*Lease, error) {
	err := h.lease.Err()
	if err == nil && !h.lease.held() {
		err = fmt.Errorf("%w: %s is being released", ErrNotHeld, r.path) // Lease.Release was called directly
	}
	if err == nil {
		return h.lease, nil
	}
	r.c.holds.mu.Lock()
	h.count--
	r.c.holds.mu.Unlock()
	return nil, err
}

// first queues for the lock with the owner's fresh hold h.
func (r *ReentrantMutex) first(ctx context.Context, key string, h *ownerHold, explicit string, g int64, try bool) (*Lease, error) {
	c := r.c
	a := ask{path: r.path, owner: c.me.record(explicit, g), try: try, style: lockpath.MutexStyle, rule: lockpath.MutexTurn, policy: policyLock}
	a.hold = func(n *nodeHolding) holding { return &reentrantHold{nodeHolding: n, r: r, key: key, h: h} }
	l, err := c.acquire(ctx, a)
	c.holds.mu.Lock()
	defer c.holds.mu.Unlock()
	if err != nil {
		r.forget(key, h)
	} else {
		h.lease, h.count = l, 1
	}
	close(h.ready)
	return l, err
}

// forget drops h from the holds; the table's lock is held.
func (r *ReentrantMutex) forget(key string, h *ownerHold) {
	holds := r.c.holds.byPath[r.path]
	if holds[key] == h {
		delete(holds, key)
	}
	if len(holds) == 0 {
		delete(r.c.holds.byPath, r.path)
	}
}

// Release gives up one hold of the caller's owner. Only the last one deletes
// the node. A caller that does not hold the lock gets ErrNotOwner if another
// owner in this client holds it, ErrNotHeld otherwise, and nothing changes.
// The hold is forgotten only once the node is gone (or its session is): if
// the delete fails, Release returns the error and the owner still holds one
// hold to release again.
//
// The Lease that Acquire returned follows the same rule: its Release gives
// up one hold of the owner it was granted to, from any goroutine, so the
// mutex and the lease always agree. Use either; a nested Release while the
// lease is held returns nil, and the last returns what Lease.Release does.
func (r *ReentrantMutex) Release(ctx context.Context) error {
	explicit, g := ownerID(ctx)
	key := holdKey(explicit, g)
	c := r.c
	c.holds.mu.Lock()
	holds := c.holds.byPath[r.path]
	h := holds[key]
	if h == nil || h.lease == nil {
		other := heldByOther(holds, key)
		c.holds.mu.Unlock()
		if other {
			return fmt.Errorf("%w of %s", ErrNotOwner, r.path)
		}
		return fmt.Errorf("%w: %s", ErrNotHeld, r.path)
	}
	return r.releaseHold(ctx, key, h)
}

// releaseHold gives up one hold of h, the hold of owner key; it is called
// with the table's lock held, and releases it.
func (r *ReentrantMutex) releaseHold(ctx context.Context, key string, h *ownerHold) error {
	c := r.c
	if h.releasing != nil {
		c.holds.mu.Unlock()
		return fmt.Errorf("%w: %s is being released", ErrNotHeld, r.path)
	}
	if h.count > 1 {
		h.count--
		err := h.lease.Err() // a nested release of a lost lease says so
		c.holds.mu.Unlock()
		return err
	}
	rel := make(chan struct{})
	h.releasing = rel // same-owner Acquires wait instead of re-entering a lease being released
	c.holds.mu.Unlock()

	err := h.lease.onNode().release(ctx)
	c.holds.mu.Lock()
	defer c.holds.mu.Unlock()
	h.releasing = nil
	close(rel)
	if err != nil && h.lease.held() {
		return err // the node is still there: the owner keeps its hold
	}
	r.forget(key, h)
	return err
}

// reentrantHold is a reentrant lease's holding: its node's, tied to the
// owner's hold, so that Lease.Release counts down the hold like
// ReentrantMutex.Release.
type reentrantHold struct {
	*nodeHolding
	r   *ReentrantMutex
	key string
	h   *ownerHold
}

// release gives up one hold through the lease.
func (rh *reentrantHold) release(ctx context.Context) error {
	c := rh.r.c
	c.holds.mu.Lock()
	if c.holds.byPath[rh.r.path][rh.key] != rh.h {
		c.holds.mu.Unlock()
		return rh.nodeHolding.release(ctx) // the hold is gone: the lease says why (ErrNotHeld, its loss)
	}
	return rh.r.releaseHold(ctx, rh.key, rh.h)
}

// isReentrant reports a lease of a ReentrantMutex.
func isReentrant(l *Lease) bool {
	_, ok := l.h.(*reentrantHold)
	return ok
}
