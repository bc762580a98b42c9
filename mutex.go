package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

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
	return opError("acquire", m.path)(m.c.acquire(ctx, m.c.exclusive(ctx, m.path, false)))
}

// TryAcquire takes the lock only if nobody holds it or waits ahead of the
// caller; otherwise it returns ErrLocked and leaves nothing behind. It never
// waits for the lock, and not for ZooKeeper either beyond ctx or the session
// timeout, whichever ends first: then its error matches ErrUnreachable.
func (m *Mutex) TryAcquire(ctx context.Context) (*Lease, error) {
	return opError("try-acquire", m.path)(m.c.acquire(ctx, m.c.exclusive(ctx, m.path, true)))
}

// ask is what one Acquire asks of the core: a node named in style under
// path, holding when rule says so. Every primitive is an ask.
type ask struct {
	path      string
	owner     Owner
	try       bool // never wait: ErrLocked unless it holds at once
	style     lockpath.Style
	rule      lockpath.Rule
	watchList bool // wait on the list of the path, not on the node rule names (a semaphore's lease)
	brief     bool // held only for a moment (a semaphore's turnstile): no token read, no own-node watch, no metrics
	once      bool // report a vanished node instead of queueing again: the primitive decides (a semaphore's lease)
	quiet     bool // the primitive reports this Acquire to Metrics itself
}

// exclusive is a mutex's ask for the caller of ctx.
func (c *Client) exclusive(ctx context.Context, path string, try bool) ask {
	explicit, g := ownerID(ctx)
	return ask{path: path, owner: c.ownerRecord(explicit, g), try: try, style: lockpath.MutexStyle, rule: lockpath.MutexTurn}
}

// acquire runs the recipe: queue, wait for the turn, and turn the node into a
// lease; on any failure the node is removed. A node that vanished while
// waiting (session expired, or deleted by someone else) is queued again at
// the back, or reported (WithRequeueOnExpiry).
func (c *Client) acquire(ctx context.Context, a ask) (*Lease, error) {
	if !c.track() {
		return nil, ErrClosed
	}
	defer c.wg.Done()
	if a.try {
		var cancel context.CancelFunc
		ctx, cancel = c.answerBound(ctx)
		defer cancel()
	}
	start := time.Now()
	l, err := c.acquireQueued(ctx, a)
	if !a.brief && !a.quiet {
		c.opts.metrics.Acquired(a.style.Kind, time.Since(start), err)
	}
	return l, err
}

// acquireQueued is acquire once tracked.
func (c *Client) acquireQueued(ctx context.Context, a ask) (*Lease, error) {
	for {
		l, err := c.acquireOnce(ctx, a)
		gone := errors.Is(err, errSessionOver) || errors.Is(err, errNodeDeleted)
		switch {
		case !gone:
			return l, err
		case c.isClosed():
			return nil, ErrClosed
		case !c.opts.requeue, a.once:
			return nil, goneError(err, a.path)
		case ctx.Err() != nil:
			// The give-up of the node that went may have used the cleanup
			// timeout past the deadline already: a new create would wait
			// for its own outcome as long again.
			return nil, c.ctxErr(ctx)
		}
		c.log.Info("zklock: queue node gone while waiting; queueing again at the back", "path", a.path, "why", err)
	}
}

// acquireOnce queues one node and waits for its turn.
func (c *Client) acquireOnce(ctx context.Context, a ask) (*Lease, error) {
	sess, err := c.liveSession(ctx)
	if err != nil {
		return nil, err
	}
	q, children, err := c.enqueue(ctx, a, sess)
	if err != nil {
		return nil, err
	}
	if _, none := c.opts.metrics.(noMetrics); children != nil && !none && !a.brief {
		c.opts.metrics.Queued(a.style.Kind, lockpath.Count(children)) // a parse of the queue: only when someone listens
	}
	if err := c.wait(ctx, q, a, children); err != nil {
		return nil, c.giveUp(q, err)
	}
	if c.opts.watchOwnNode && !a.brief {
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

// wait waits for q's turn by a's rule.
func (c *Client) wait(ctx context.Context, q *queueNode, a ask, children []string) error {
	var w watcher = nodeWatcher{c}
	if a.watchList {
		w = &listWatcher{c: c}
	}
	return c.waitTurn(ctx, q, a.rule, w, children, a.try)
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
