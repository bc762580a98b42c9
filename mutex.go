package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

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
// lease; on any failure the node is removed. A node that vanished while
// waiting (session expired, or deleted by someone else) is queued again at
// the back, or reported (WithRequeueOnExpiry).
func (c *Client) acquire(ctx context.Context, lockPath string, owner Owner, try bool) (*Lease, error) {
	if !c.track() {
		return nil, ErrClosed
	}
	defer c.wg.Done()
	for {
		l, err := c.acquireOnce(ctx, lockPath, owner, try)
		gone := errors.Is(err, errSessionOver) || errors.Is(err, errNodeDeleted)
		switch {
		case !gone:
			return l, err
		case c.isClosed():
			return nil, ErrClosed
		case !c.opts.requeue:
			return nil, goneError(err, lockPath)
		}
		c.log.Info("zklock: queue node gone while waiting; queueing again at the back", "path", lockPath, "why", err)
	}
}

// acquireOnce queues one node and waits for its turn.
func (c *Client) acquireOnce(ctx context.Context, lockPath string, owner Owner, try bool) (*Lease, error) {
	sess, err := c.liveSession(ctx)
	if err != nil {
		return nil, err
	}
	q, children, err := c.enqueue(ctx, lockPath, owner, sess)
	if err != nil {
		return nil, err
	}
	if err := c.waitTurn(ctx, q, mutexTurn, children, try); err != nil {
		return nil, c.giveUp(q, err)
	}
	if c.opts.watchOwnNode {
		q.startFetch() // unless confirmHead read the node already
	}
	if hook := testHookBeforeLease.Load(); hook != nil {
		(*hook)() // a pause at the worst moment, in tests
	}
	if l := c.newLease(q); l != nil {
		return l, nil
	}
	return nil, c.giveUp(q, ErrClosed)
}

// testHookBeforeLease, set only by tests, runs between the grant and the
// making of the lease.
var testHookBeforeLease atomic.Pointer[func()]

// giveUp removes q after err ended its wait. If the server refuses the delete
// (an ACL), the error names the node, which stays until its session ends.
func (c *Client) giveUp(q *queueNode, err error) error {
	if derr := c.abandon(q); derr != nil {
		return fmt.Errorf("%w; queue node %s stays until the session ends (its delete was refused: %w)", err, q.full(), derr)
	}
	return err
}

// goneError is what a caller that does not re-queue sees.
func goneError(err error, lockPath string) error {
	if errors.Is(err, errNodeDeleted) {
		return fmt.Errorf("%w (%s)", ErrQueueNodeDeleted, lockPath)
	}
	return fmt.Errorf("%w (%s): %w", ErrSessionExpired, lockPath, zk.ErrSessionExpired)
}
