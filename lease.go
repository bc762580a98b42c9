package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lease is one holding of a lock: from the Acquire that returned it until
// Release, or until the lock is lost.
//
// A lock can be lost while the holder still runs: the session expires, the
// node is deleted by someone else, or the client cannot reach ZooKeeper for
// so long that the server may already have given the lock to another. Done is
// closed the moment zklock knows or must presume this, before any other
// session could be granted the lock, but a holder that is paused (GC, VM
// freeze) notices only when it runs again: Err checks the loss rule at the
// moment it is called, so check it right before acting. Protect the resource
// itself with the fencing token: have it reject writes carrying a token lower
// than the highest it has seen.
type Lease struct {
	c     *Client
	q     *queueNode
	parts []*Lease // a MultiLock's lease is made of parts, and has no node of its own
	// reentry, on a ReentrantMutex's lease, counts Release against its hold
	// (reentrant.go); set once, before the lease is returned.
	reentry *reentrantHold
	ext     interface{ Release(context.Context) error } // a holding kept outside ZooKeeper, by a test double; q has no client then
	since   time.Time                                   // granted
	unkeep  func()                                      // ends the keep-alive's demand (keepalive.go)

	presumed    chan struct{} // closed when the connection dropped and there is no wire clock; nil with one
	presumeOnce sync.Once

	revoke chan struct{} // closed when someone asks the holder to release (revoke.go), under mu
	// dataWatch, for a lease watched through its listing (listwatch.go),
	// asks its monitor for the own-node watch that hears revoke.
	dataWatch *dataWatch

	mu         sync.Mutex
	state      leaseState
	err        error // why the lease ended; nil until then
	deferred   error // a loss seen while a Release was deleting the node
	errClaimed bool  // a Release has reported the end already
	done       chan struct{}
	onEnd      []func(error) // run when the lease ends, under mu: they must not block
	onRevoke   []func()      // run when a release is asked for, under mu (revoke.go)
	hold       HoldSpan      // the hold's trace, nil unless the client traces; under mu
}

// leaseState is where a lease is in its life. The transitions, all in this
// file: held → releasing (Release starts the delete); releasing → ended (the
// delete is confirmed, or the caller stopped waiting); releasing → held (the
// server refused the delete: the node is still there and still watched);
// held → ended (loss). A loss seen while releasing waits for the delete's
// outcome: a confirmed delete proves the node was ours until then.
type leaseState int

const (
	leaseHeld leaseState = iota
	leaseReleasing
	leaseEnded
)

// newLease registers q as a held lease of its client and starts its monitor; nil if the
// client is closing. A lease that must already be presumed lost (a pause
// between the grant and now, a connection that just dropped) is returned
// with Done closed.
func newLease(q *queueNode) *Lease { return newLeaseSince(q, time.Now()) }

// newLeaseSince is newLease for a holding granted at since: a downgraded
// reader's, which goes on with the writer's holding (its hold limit runs
// from the writer's grant).
func newLeaseSince(q *queueNode, since time.Time) *Lease {
	c := q.c
	l := &Lease{c: c, q: q, since: since, revoke: make(chan struct{}), done: make(chan struct{}), dataWatch: newDataWatch(q.listWatched)}
	if c.wire == nil { // with the wire clock, nothing closes it: a lease of Connect's does without
		l.presumed = make(chan struct{})
	}
	if !c.register(l) {
		return nil
	}
	l.unkeep = c.keep.want(true)
	if err := q.lossCheck(); err != nil {
		l.lose(err)
	}
	l.stampGrant()
	go l.monitor()
	return l
}

// Node returns the full path of the lock node (a MultiLock's lease: its
// parts' nodes, comma-separated).
func (l *Lease) Node() string {
	if l.parts != nil {
		return l.multiNodes()
	}
	return l.q.full()
}

// Sequence returns the node's sequence number within its lock path (a
// MultiLock's lease: its first part's).
func (l *Lease) Sequence() int64 {
	if l.parts != nil {
		return l.parts[0].Sequence()
	}
	return l.q.seq
}

// Token returns the fencing token: the creation zxid of the lock node, unique
// across the ensemble and larger for every later holder of the same path,
// even after the path was deleted and recreated (a read lease made by
// RWMutex.Downgrade keeps the writer's token: it holds the writer's place). A lease granted after a wait
// knows it when Acquire returns; otherwise it may take one round trip (the
// read runs behind Acquire; a client made by Connect reads it off the
// create's reply and needs no round trip at all). It fails if ctx ends first, or if the lease ended
// before the token was known (the error is the lease's end: Err says the same).
// Once the lease has ended it returns no token but the end (as Err does:
// ErrLockLost, ErrReleased, ...): a token is only ever a holder's. Like
// Err, it applies the loss rule at the moment it is called. A MultiLock's lease returns the highest of
// its parts' tokens; each part's own Token fences the resource of its path.
func (l *Lease) Token(ctx context.Context) (int64, error) {
	if l.parts != nil {
		return l.multiToken(ctx)
	}
	t, err := l.readToken(ctx)
	if err != nil {
		return 0, err
	}
	if err := l.Err(); err != nil {
		return 0, err // a token is a claim to hold the lock: never one of an ended lease
	}
	return t, nil
}

// readToken returns the node's creation zxid, reading the node if the
// create's reply did not carry it.
func (l *Lease) readToken(ctx context.Context) (int64, error) {
	if t := l.q.createZxid; t != 0 {
		return t, nil // read off the create's reply
	}
	l.q.startFetch() // already under way unless the own-node watch is off
	select {
	case <-l.q.fetched:
	case <-ctx.Done():
		return 0, l.c.ctxErr(ctx)
	case <-l.done:
		if !isDone(l.q.fetched) {
			return 0, l.Err()
		}
	}
	if l.q.fetchErr != nil {
		return 0, fetchLost(l.q.full(), l.q.fetchErr) // the monitor ends the lease with the same
	}
	return l.q.czxid, nil
}

// Done returns a channel closed when the lease ends for any reason: Release,
// loss, or Close.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held, then why it ended: ErrReleased,
// ErrClosed, or an error matching ErrLockLost that wraps the cause. It applies
// the loss rule at the moment it is called, so a holder that was paused learns
// of a loss from Err even before the monitor has run.
func (l *Lease) Err() error {
	if l.parts != nil {
		return l.multiErr()
	}
	l.mu.Lock()
	state, err := l.state, l.err
	l.mu.Unlock()
	if state == leaseEnded {
		return err
	}
	if lerr := l.q.lossCheck(); lerr != nil {
		l.lose(lerr)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// presumeLost is called from the event goroutine when the connection dropped
// and there is no wire clock; it must not block.
func (l *Lease) presumeLost() {
	if l.presumed != nil {
		l.presumeOnce.Do(func() { close(l.presumed) })
	}
}

// Release gives the lock up: it deletes the node and closes Done. A second
// Release returns ErrNotHeld. Releasing a lease that was lost returns its loss
// error, and so does a Release during which the lease is lost: when
// ZooKeeper does not answer, Release returns the loss (ErrLockLost) by the
// time the lease must be presumed lost, even with context.Background(). If
// ctx ends before the delete is confirmed, Release returns ctx's error. In
// both cases the lease is over all the same, and the delete goes on in the
// background until the node or its session is gone. If the server refuses
// the delete (an ACL without delete permission, say), Release returns that
// error and the lease stays held, and watched, so Release can be tried again.
//
// A ReentrantMutex's lease releases one hold, as ReentrantMutex.Release does:
// only the last deletes the node.
func (l *Lease) Release(ctx context.Context) error {
	switch {
	case l.parts != nil:
		return l.multiRelease(ctx)
	case l.reentry != nil:
		return l.reentry.release(ctx)
	case l.ext != nil:
		return l.releaseExternal(ctx)
	}
	return l.releaseNode(ctx)
}

// releaseNode deletes the node: Release of a plain lease, the last hold's of
// a reentrant one.
func (l *Lease) releaseNode(ctx context.Context) error {
	if err := l.beginRelease(); err != nil {
		return err
	}
	how, err := l.q.removeWithin(ctx, l.done)
	switch {
	case errors.Is(err, errLeaseEnded):
		return l.endRelease(removedUnknown) // the loss; the delete goes on in the background
	case classify(err) == errStop:
		l.endRelease(removedUnknown) // the delete goes on in the background
		return err
	case err != nil:
		if end := l.refusedRelease(err); end != err {
			return end // a loss ended the lease meanwhile
		}
		return fmt.Errorf("zklock: release %s: %w", l.q.full(), err)
	}
	return l.endRelease(how)
}

// beginRelease moves a held lease to releasing, or says why it cannot. The
// loss rule goes first: a lease that must be presumed lost is not released
// but lost.
func (l *Lease) beginRelease() error {
	if l.held() {
		if lerr := l.q.lossCheck(); lerr != nil {
			l.lose(lerr)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.state {
	case leaseReleasing:
		return ErrNotHeld
	case leaseEnded:
		if l.errClaimed || errors.Is(l.err, ErrReleased) {
			return ErrNotHeld
		}
		l.errClaimed = true
		return l.err
	}
	l.state = leaseReleasing
	return nil
}

// endRelease applies how the node went: only our own delete makes a
// release; a node someone else deleted, or a session that ended, is the loss
// it is. A loss that ended the lease meanwhile stands. It returns what
// Release returns.
func (l *Lease) endRelease(how removal) error {
	l.mu.Lock()
	if l.state == leaseEnded {
		l.errClaimed = true
		err := l.err
		l.mu.Unlock()
		return err
	}
	end := ErrReleased
	switch how {
	case removedByOther:
		end = deletedByOther(l.q.full())
		if l.deferred != nil {
			end = l.deferred
		}
	case removedWithSession:
		end = l.c.sessionLoss()
	}
	l.endLocked(end)
	l.errClaimed = true
	l.mu.Unlock()
	l.forget()
	if end == ErrReleased {
		return nil
	}
	return end
}

// refusedRelease handles a delete the server refused: the node is still
// there, so the lease is held again and still watched, and a node-deleted
// loss seen meanwhile takes effect. Once Close has begun, the lease ends
// instead: closing the session removes the node. It returns what Release
// reports: the loss, if one ended the lease meanwhile, or delErr.
func (l *Lease) refusedRelease(delErr error) error {
	l.mu.Lock()
	switch {
	case l.state == leaseEnded:
		l.errClaimed = true
		err := l.err
		l.mu.Unlock()
		return err
	case l.c.isClosed():
		l.endLocked(ErrClosed)
		l.errClaimed = true
		l.mu.Unlock()
		l.forget()
		return delErr
	}
	l.state = leaseHeld
	deferred := l.deferred
	l.deferred = nil
	l.mu.Unlock()
	if deferred != nil {
		l.lose(deferred)
	}
	return delErr
}

// endOnClose ends a held lease for Close, before its node is deleted: its
// holder must hear that the lock is going before anyone else can get it.
// It reports whether it ended the lease (one being released is left to its
// Release).
func (l *Lease) endOnClose() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != leaseHeld {
		return false
	}
	l.endLocked(ErrClosed)
	l.errClaimed = true // Close released it: a later Release says ErrNotHeld
	return true
}

// endLocked closes Done with err and runs the end hooks; l.mu is held.
func (l *Lease) endLocked(err error) {
	l.state = leaseEnded
	l.err = err
	if !l.q.brief { // before Done closes: whoever waits on Done finds the end counted
		l.c.opts.metrics.Ended(l.q.style.Kind, time.Since(l.since), err)
	}
	close(l.done)
	if l.hold != nil {
		l.hold.Ended(err)
	}
	for _, fn := range l.onEnd {
		fn(err)
	}
	l.onEnd = nil
}

// whenEnded runs fn(err) as the lease ends, before its node is deleted by
// zklock, or now if it has ended. fn runs under the lease's lock and must
// not block (a context's cancel, say).
func (l *Lease) whenEnded(fn func(error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == leaseEnded {
		fn(l.err)
		return
	}
	l.onEnd = append(l.onEnd, fn)
}

// lose ends the lease with err (a loss, or the hold limit) and removes its
// node in the background if the session may still hold it, so the queue
// behind it moves. While a
// Release is deleting the node, a node-deleted loss may be that very delete:
// it waits for the delete's outcome; any other loss ends the lease at once.
func (l *Lease) lose(err error) {
	err = l.overdueEnd(err)
	l.mu.Lock()
	releasing := l.state == leaseReleasing
	switch {
	case l.state == leaseEnded:
		l.mu.Unlock()
		return
	case releasing && isNodeDeleted(err):
		if l.deferred == nil {
			l.deferred = err
		}
		l.mu.Unlock()
		return
	}
	l.endLocked(err)
	l.mu.Unlock()
	c := l.c
	if errors.Is(err, ErrHoldLimit) {
		c.log.Info("zklock: hold limit reached; releasing", "node", l.q.full(), "limit", c.opts.maxHold)
	} else {
		c.log.Warn("zklock: lock lost", "node", l.q.full(), "err", err)
	}
	l.forget()
	if !releasing { // a Release is deleting it already
		// Delete by name even if the session seems over: the name carries
		// our GUID, and a node that is already gone costs one NoNode.
		l.q.removeInBackground()
	}
}

// forget takes l off its client's held leases.
func (l *Lease) forget() {
	l.c.forget(l)
	if l.unkeep != nil {
		l.unkeep()
	}
}

// releaseOnClose ends a lease still held when its client closes, and deletes
// its node within ctx.
func (l *Lease) releaseOnClose(ctx context.Context) {
	if !l.endOnClose() {
		return
	}
	l.forget()
	if _, err := l.q.removeWithin(ctx, nil); err != nil && classify(err) != errStop {
		l.c.log.Warn("zklock: removing a lease's node on close", "node", l.Node(), "err", err)
	}
}

// held reports a lease that is neither ended nor being released.
func (l *Lease) held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == leaseHeld
}
