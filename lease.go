package zklock

import (
	"context"
	"errors"
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
	c *Client // nil for a lease kept outside ZooKeeper (NewLease)
	h holding // what is held, as the primitive that granted it keeps it; set once, before the lease is returned

	revoke chan struct{} // closed when someone asks the holder to release (revoke.go), under mu

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

// holding is what a Lease holds, given to it by the primitive that granted
// it: a lock node (nodeHolding, leasenode.go), a reentrant hold on one
// (reentrant.go), a MultiLock's parts (multilock.go), or a test double's
// backend (external.go). The lease keeps the states and their transitions;
// the holding answers for what it holds, and gives it up through them.
type holding interface {
	node() string                             // Node
	sequence() int64                          // Sequence
	token(ctx context.Context) (int64, error) // Token
	err() error                               // Err: the loss rule applied now, a loss ended through the lease's transitions
	release(ctx context.Context) error        // Release: the loss rule first (a lost lease is not released), then beginRelease
	deadline() time.Time                      // Deadline
	listen()                                  // someone waits on RevokeRequested
	ending(err error)                         // the lease ends with err: under its lock, before Done closes
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

// newLeaseState is a held lease of c with no holding yet: the primitive
// that makes it sets h before anyone else sees it.
func newLeaseState(c *Client) *Lease {
	return &Lease{c: c, revoke: make(chan struct{}), done: make(chan struct{})}
}

// Node returns the full path of the lock node (a MultiLock's lease: its
// parts' nodes, comma-separated).
func (l *Lease) Node() string { return l.h.node() }

// Sequence returns the node's sequence number within its lock path (a
// MultiLock's lease: its first part's).
func (l *Lease) Sequence() int64 { return l.h.sequence() }

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
func (l *Lease) Token(ctx context.Context) (int64, error) { return l.h.token(ctx) }

// Done returns a channel closed when the lease ends for any reason: Release,
// loss, or Close. A loss presumed for want of the leader's word (Deadline
// passed) leaves the lock node in place until the session may have expired,
// a whole session timeout after that word (0.2 of it after Deadline): the
// next holder is granted no earlier, and the holder has until then to stop
// its work. Closing the client meanwhile ends the session, and with it the
// node: close it only once the work has stopped.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held, then why it ended: ErrReleased,
// ErrClosed, or an error matching ErrLockLost that wraps the cause. It applies
// the loss rule at the moment it is called, so a holder that was paused learns
// of a loss from Err even before the monitor has run.
func (l *Lease) Err() error { return l.h.err() }

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
func (l *Lease) Release(ctx context.Context) error { return l.h.release(ctx) }

// Deadline returns the moment the lease will be presumed lost unless
// ZooKeeper's leader is heard from again before then: 80 % of the granted
// session timeout after the leader last confirmed the session. It moves
// forward as contact is proven (while a lease is held, zklock proves it
// about every 0.3 of the timeout), and it is the latest moment a holder may
// rely on the lease without asking Err again: a service that promises its
// own callers a lease (zklock serve) promises no later than this. It is in
// the past once the lease has ended. A MultiLock's lease returns its parts'
// earliest. The zero time when no deadline is known: a client made by
// NewClient (which cannot time the bytes: its leases end when the
// connection drops), or a lease kept outside ZooKeeper (NewLease).
func (l *Lease) Deadline() time.Time { return l.h.deadline() }

// ended returns why the lease ended and whether it has; err is nil while
// it is held or being released.
func (l *Lease) ended() (error, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err, l.state == leaseEnded
}

// held reports a lease that is neither ended nor being released.
func (l *Lease) held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == leaseHeld
}

// beginRelease moves a held lease to releasing, or says why it cannot. The
// holding applies the loss rule first: a lease that must be presumed lost
// is not released but lost.
func (l *Lease) beginRelease() error {
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

// finishRelease ends a Release with the end endOf makes of the loss seen
// meanwhile (deferred; ErrReleased for a release); a loss that ended the
// lease meanwhile stands. It returns what Release returns, and whether
// this call ended the lease.
func (l *Lease) finishRelease(endOf func(deferred error) error) (error, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errClaimed = true
	if l.state == leaseEnded {
		return l.err, false
	}
	end := endOf(l.deferred)
	l.endLocked(end)
	if end == ErrReleased {
		return nil, true
	}
	return end, true
}

// refuse handles a delete the server refused: the node is still there, so
// the lease is held again, and the loss seen meanwhile (deferred) is the
// holding's to apply. Once Close has begun, the lease ends instead
// (closed): closing the session removes the node. A loss that ended the
// lease meanwhile is returned as ended.
func (l *Lease) refuse() (ended, deferred error, closed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.state == leaseEnded:
		l.errClaimed = true
		return l.err, nil, false
	case l.c.isClosed():
		l.endLocked(ErrClosed)
		l.errClaimed = true
		return nil, nil, true
	}
	l.state = leaseHeld
	deferred, l.deferred = l.deferred, nil
	return nil, deferred, false
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

// endByLoss ends the lease with err (a loss, or the hold limit) and says
// whether it did, and whether a Release was under way. While a Release is
// deleting the node, a node-deleted loss may be that very delete: it waits
// for the delete's outcome; any other loss ends the lease at once.
func (l *Lease) endByLoss(err error) (ended, releasing bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	releasing = l.state == leaseReleasing
	switch {
	case l.state == leaseEnded:
		return false, releasing
	case releasing && isNodeDeleted(err):
		if l.deferred == nil {
			l.deferred = err
		}
		return false, releasing
	}
	l.endLocked(err)
	return true, releasing
}

// endWith ends a held or releasing lease with cause, at once (a test
// double's end function); closed marks it released by Close, so a later
// Release says ErrNotHeld.
func (l *Lease) endWith(cause error, closed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == leaseEnded {
		return
	}
	l.endLocked(cause)
	if closed {
		l.errClaimed = true
	}
}

// endLocked closes Done with err and runs the end hooks; l.mu is held.
func (l *Lease) endLocked(err error) {
	l.state = leaseEnded
	l.err = err
	l.h.ending(err) // before Done closes: whoever waits on Done finds the end counted
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

// A lease whose holding is made of leases of its own (a MultiLock's) has
// its end told by them: Err asks the parts, and Done closes with no error
// of the lease's own.

// claimRelease moves such a lease to releasing; false if a Release has
// reported its end already.
func (l *Lease) claimRelease() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.errClaimed {
		return false
	}
	l.errClaimed = true
	if l.state == leaseHeld {
		l.state = leaseReleasing
	}
	return true
}

// unclaimRelease undoes claimRelease: a part is still held.
func (l *Lease) unclaimRelease() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errClaimed = false
	if l.state == leaseReleasing {
		l.state = leaseHeld
	}
}

// releasing reports a lease whose Release is under way.
func (l *Lease) releasing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == leaseReleasing
}

// closeDone ends such a lease: Done closes.
func (l *Lease) closeDone() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != leaseEnded {
		l.state = leaseEnded
		close(l.done)
	}
}
