package zklock

import (
	"context"

	"github.com/zklock/zklock/internal/lockpath"
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
// matching context.DeadlineExceeded or context.Canceled, and also
// ErrUnreachable if the client had no working connection to ZooKeeper when
// ctx ended (an outage is not contention). When ZooKeeper answers, its
// queue node has been deleted before it returns, which takes one round trip
// and at most the cleanup timeout (WithCleanupTimeout); when it does not,
// Acquire returns at the deadline and the delete goes on in the background
// until the node or its session is gone. Any other failure leaves nothing
// behind either. With context.Background(), Acquire waits for the lock
// through an outage too, until Close.
//
// If the session expires while waiting, the caller re-queues at the back on
// the new session, or fails with ErrSessionExpired (WithRequeueOnExpiry).
func (m *Mutex) Acquire(ctx context.Context) (*Lease, error) {
	return opError("acquire", m.path)(m.acquire(ctx, false))
}

// TryAcquire takes the lock only if nobody holds it or waits ahead of the
// caller; otherwise it returns ErrLocked and leaves nothing behind. It never
// waits for the lock, and not for ZooKeeper either beyond ctx or the session
// timeout, whichever ends first: then its error matches ErrUnreachable.
func (m *Mutex) TryAcquire(ctx context.Context) (*Lease, error) {
	return opError("try-acquire", m.path)(m.acquire(ctx, true))
}

// acquire queues for m, watching the first listing when the client's last
// acquisitions of the path were granted at once, and remembers whether this
// one was (listwatch.go).
func (m *Mutex) acquire(ctx context.Context, try bool) (*Lease, error) {
	c := m.c
	a := c.exclusive(ctx, m.path, try)
	a.watchListing = c.wire != nil && c.opts.watchOwnNode && c.atOnce.predicts(m.path)
	l, err := c.acquire(ctx, a)
	c.atOnce.learn(m.path, l != nil && l.onNode().q.heldAtOnce)
	return l, err
}

// exclusive is a mutex's ask for the caller of ctx.
func (c *Client) exclusive(ctx context.Context, path string, try bool) ask {
	return ask{path: path, owner: c.me.record(explicitOwner(ctx), 0), try: try, style: lockpath.MutexStyle, rule: lockpath.MutexTurn, policy: policyLock}
}
