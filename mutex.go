package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Mutex is a fair distributed lock on one ZooKeeper path: contenders are
// served in the order they joined the queue, across all clients. A Mutex does
// no I/O until Acquire, and is safe for concurrent use; every Acquire queues
// on its own (a Mutex is not reentrant: see ReentrantMutex).
type Mutex struct {
	c    *Client
	path string
}

// NewMutex returns a Mutex on path. It checks the path and does no I/O.
func (c *Client) NewMutex(path string) (*Mutex, error) {
	if err := validatePath(path); err != nil {
		return nil, err
	}
	return &Mutex{c: c, path: path}, nil
}

// Path returns the lock path.
func (m *Mutex) Path() string { return m.path }

// Acquire blocks until the caller holds the lock and returns its Lease. A
// ctx deadline is the timeout. When ctx ends first, Acquire returns an error
// matching context.DeadlineExceeded or context.Canceled, and its queue node
// has been deleted before it returns (if the connection is down, deletion is
// awaited up to the cleanup timeout and then goes on in the background until
// the node or its session is gone). Any other failure leaves nothing behind
// either.
//
// If the session expires while waiting, the caller re-queues at the back on
// the new session, or fails with ErrSessionExpired (WithRequeueOnExpiry).
func (m *Mutex) Acquire(ctx context.Context) (*Lease, error) {
	explicit, g := ownerID(ctx)
	return m.c.acquire(ctx, m.path, m.c.ownerRecord(explicit, g), false)
}

// TryAcquire takes the lock only if nobody holds it or waits ahead of the
// caller; otherwise it returns ErrLocked and leaves nothing behind.
func (m *Mutex) TryAcquire(ctx context.Context) (*Lease, error) {
	explicit, g := ownerID(ctx)
	return m.c.acquire(ctx, m.path, m.c.ownerRecord(explicit, g), true)
}

// acquire runs the recipe: queue, wait for the turn, and turn the node into a
// lease; on any failure the node is removed.
func (c *Client) acquire(ctx context.Context, lockPath string, owner Owner, try bool) (*Lease, error) {
	if !c.track() {
		return nil, ErrClosed
	}
	defer c.wg.Done()
	for {
		sess, err := c.liveSession(ctx)
		if err != nil {
			return nil, err
		}
		q, children, err := c.enqueue(ctx, lockPath, owner, sess)
		if err == nil {
			err = c.waitTurn(ctx, q, children, try)
			if err == nil {
				if l := c.newLease(q); l != nil {
					return l, nil
				}
				err = ErrClosed
			}
			c.abandon(q)
		}
		if errors.Is(err, errRequeue) && !c.isClosed() {
			if !c.opts.requeue {
				return nil, ErrSessionExpired
			}
			c.log.Info("zklock: queue node lost with the session; queueing again at the back", "path", lockPath)
			continue
		}
		return nil, err
	}
}

// Lease is one holding of a lock: from the Acquire that returned it until
// Release, or until the lock is lost.
//
// A lock can be lost while the holder still runs: the session expires, the
// node is deleted by someone else, or the client cannot reach ZooKeeper for
// so long that the server may already have given the lock to another. Done is
// closed the moment zklock knows or must presume this, before any other
// session could be granted the lock, but a holder that is paused (GC, VM
// freeze) notices only when it runs again. Protect the resource itself with
// the fencing token: have it reject writes carrying a token lower than the
// highest it has seen.
type Lease struct {
	c *Client
	q *queueNode

	stop     chan struct{} // closed by release: the monitor stops
	stopOnce sync.Once
	lostOnce sync.Once
	presumed chan struct{} // closed when loss must be presumed (no wire clock)

	mu        sync.Mutex
	releasing bool // a Release is deleting the node
	released  bool // the node is gone (or being removed in the background)
	pending   bool // a Release failed and the node is still there
	err       error
	done      chan struct{}
}

// newLease registers q as a held lease and starts its monitor; nil if the
// client is closing.
func (c *Client) newLease(q *queueNode) *Lease {
	l := &Lease{c: c, q: q, stop: make(chan struct{}), presumed: make(chan struct{}), done: make(chan struct{})}
	c.mu.Lock()
	if c.isClosed() {
		c.mu.Unlock()
		return nil
	}
	c.leases[l] = struct{}{}
	c.wg.Add(1)
	c.mu.Unlock()
	go l.monitor()
	return l
}

// Node returns the full path of the lock node.
func (l *Lease) Node() string { return l.q.full() }

// Sequence returns the node's sequence number within its lock path.
func (l *Lease) Sequence() int64 { return l.q.seq }

// Token returns the fencing token: the creation zxid of the lock node, unique
// across the ensemble and larger for every later holder of the same path,
// even after the path was deleted and recreated. It may wait for one round
// trip the first time (the read runs behind Acquire). It returns 0 if the
// node could not be read, or the lease ended before the read came back; Err
// then reports why.
func (l *Lease) Token() int64 {
	l.q.startFetch() // already under way unless the own-node watch is off
	select {
	case <-l.q.fetched:
	case <-l.done:
		select {
		case <-l.q.fetched: // both ready: the token is known
		default:
			return 0 // ended (lost) while the read waits for the server
		}
	}
	if l.q.fetchErr != nil {
		// Say so at once; the monitor removes what is left.
		l.end(fetchLost(l.q.full(), l.q.fetchErr))
		return 0
	}
	return l.q.czxid
}

// Done returns a channel closed when the lease ends for any reason: Release,
// loss, or Close.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held, then why it ended: ErrReleased,
// ErrClosed, or an error matching ErrLockLost that wraps the cause.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// end closes Done with err, once.
func (l *Lease) end(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return false
	}
	l.err = err
	close(l.done)
	return true
}

// presumeLost is called from the event loop when the connection dropped and
// there is no wire clock; it must not block.
func (l *Lease) presumeLost() { l.lostOnce.Do(func() { close(l.presumed) }) }

// Release gives the lock up: it deletes the node and closes Done. A second
// Release returns ErrNotHeld. Releasing a lease that was lost returns its loss
// error. If ctx ends before the delete is confirmed, Release returns ctx's
// error; the lease is over all the same, and the delete goes on in the
// background until the node or its session is gone.
func (l *Lease) Release(ctx context.Context) error {
	return l.release(ctx, ErrReleased)
}

func (l *Lease) release(ctx context.Context, reason error) error {
	l.mu.Lock()
	if l.released || l.releasing {
		l.mu.Unlock()
		return ErrNotHeld
	}
	if l.err != nil {
		// Lost: remove whatever is left in the background (the monitor may
		// be doing the same; deleting twice is harmless) and stop the monitor.
		l.released = true
		err := l.err
		l.mu.Unlock()
		c := l.c
		if c.trackRelease() {
			go func() {
				defer c.wg.Done()
				_ = c.removeNode(l.q)
			}()
		}
		l.stopOnce.Do(func() { close(l.stop) })
		return err
	}
	l.releasing = true
	l.mu.Unlock()

	c := l.c
	done := make(chan error, 1)
	remove := func() { done <- c.removeNode(l.q) }
	if c.trackRelease() {
		go func() {
			defer c.wg.Done()
			remove()
		}()
	} else {
		remove() // Close has finished releasing: no new goroutines
	}
	l.stopOnce.Do(func() { close(l.stop) })
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctxErr(ctx) // the delete goes on in the background
	}
	if err != nil && ctx.Err() == nil {
		// ZooKeeper refused the delete (an ACL, say): the node is still
		// there, and a later Release tries again.
		l.mu.Lock()
		l.releasing, l.pending = false, true
		l.mu.Unlock()
		return err
	}
	l.mu.Lock()
	l.releasing, l.released, l.pending = false, true, false
	l.mu.Unlock()
	l.end(reason)
	c.mu.Lock()
	delete(c.leases, l)
	c.mu.Unlock()
	return err
}

// releasePending reports a Release that failed with the node still there.
func (l *Lease) releasePending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending
}

// monitor ends the lease when the lock is lost: the session expires, the node
// is deleted by someone else, or contact with the server has been lost for so
// long that the session may have expired (see lossDeadline).
func (l *Lease) monitor() {
	c := l.c
	defer c.wg.Done()
	q := l.q
	var own <-chan zk.Event
	fetched := q.fetched // without the own-node watch, closed only if Token reads the node
	var rewatch <-chan result[<-chan zk.Event]
	var timer *time.Timer
	var tick <-chan time.Time
	if c.wire != nil {
		timer = time.NewTimer(c.untilLossDeadline())
		defer timer.Stop()
		tick = timer.C
	}
	for {
		select {
		case <-l.stop:
			return
		case <-fetched:
			fetched = nil
			if q.fetchErr != nil {
				l.lose(fetchLost(q.full(), q.fetchErr))
				return
			}
			own = q.ownEv
		case ev := <-own:
			own = nil
			switch {
			case ev.Type == zk.EventNodeDeleted:
				if c.wire != nil && c.untilLossDeadline() <= 0 {
					// Woken after a pause: the server expired the session
					// and deleted the node itself.
					l.lose(fmt.Errorf("%w: no word from ZooKeeper for longer than the session can be trusted (node %s is gone)", ErrLockLost, q.full()))
					return
				}
				l.lose(fmt.Errorf("%w: node %s was deleted by someone else", ErrLockLost, q.full()))
				return
			case ev.Type == zk.EventNotWatching:
				// The session ended; sess.lost says so too.
			default:
				// Someone changed the node's data: watch it again, without
				// blocking the other checks while the request is out.
				rewatch = goCall(c, func() (<-chan zk.Event, error) {
					_, _, ch, err := c.conn.GetW(q.full())
					return ch, err
				})
			}
		case r := <-rewatch:
			rewatch = nil
			if errors.Is(r.err, zk.ErrNoNode) {
				l.lose(fmt.Errorf("%w: node %s was deleted by someone else", ErrLockLost, q.full()))
				return
			}
			own = r.v // nil after another error: the session checks still apply
		case <-q.sess.lost:
			if c.isClosed() {
				l.lose(ErrClosed)
			} else {
				l.lose(fmt.Errorf("%w: session expired: %w", ErrLockLost, zk.ErrSessionExpired))
			}
			return
		case <-l.presumed:
			l.lose(fmt.Errorf("%w: connection to ZooKeeper lost", ErrLockLost))
			return
		case <-tick:
			d := c.untilLossDeadline()
			if d <= 0 {
				l.lose(fmt.Errorf("%w: no word from ZooKeeper for longer than the session can be trusted", ErrLockLost))
				return
			}
			timer.Reset(d)
		}
	}
}

// lose ends the lease with err and removes the node if the session may still
// hold it (when loss was only presumed), so the queue behind it moves.
func (l *Lease) lose(err error) {
	l.mu.Lock()
	releasing := l.releasing
	l.mu.Unlock()
	if releasing {
		return // our own Release is deleting the node: not a loss
	}
	c := l.c
	if l.end(err) {
		c.log.Warn("zklock: lock lost", "node", l.q.full(), "err", err)
	}
	c.mu.Lock()
	delete(c.leases, l)
	c.mu.Unlock()
	// Delete by name even if the session seems over: the name carries our
	// GUID, and a node that is already gone costs one NoNode.
	_ = c.removeNode(l.q)
}

// fetchLost turns a failed read of the lease's own node into the loss it means.
func fetchLost(node string, err error) error {
	switch {
	case errors.Is(err, ErrLockLost), errors.Is(err, ErrClosed):
		return err
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("%w: node %s was deleted by someone else", ErrLockLost, node)
	case errors.Is(err, zk.ErrSessionExpired):
		return fmt.Errorf("%w: session expired: %w", ErrLockLost, err)
	default:
		return fmt.Errorf("%w: reading %s: %w", ErrLockLost, node, err)
	}
}

// lossFraction is the part of the granted session timeout, counted from the
// last moment the server is known to have heard from this client, after which
// a lease is presumed lost. ZooKeeper expires a session no earlier than one
// timeout after it last heard from the client (it rounds expiry up to the next
// tick), and only then can another session be granted the lock; the 20%
// margin absorbs timer lateness and clock-rate differences.
const lossFraction = 0.8

// untilLossDeadline returns how long until leases must be presumed lost.
func (c *Client) untilLossDeadline() time.Duration {
	contact, granted := c.wire.lastContact()
	if granted <= 0 {
		granted = c.opts.sessionTimeout
	}
	return time.Until(contact.Add(time.Duration(float64(granted) * lossFraction)))
}
