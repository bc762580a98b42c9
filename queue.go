package zklock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// This file holds the queue node's life: the protected create, the listing
// pipelined behind it, the fetch of its fencing token, and its removal on
// every path that gives it up.

// errRequeue means the caller's queue node vanished with its session (or was
// deleted by someone else) while it waited: it may queue again, at the back.
var errRequeue = errors.New("zklock: queue node gone")

// track registers one more zklock goroutine or call that Close must wait
// for; false once the client is closing.
func (c *Client) track() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isClosed() {
		return false
	}
	c.wg.Add(1)
	return true
}

type result[T any] struct {
	v   T
	err error
}

// trackRelease is track for a lease's release, which Close itself makes:
// it succeeds until Close has finished releasing.
func (c *Client) trackRelease() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drained {
		return false
	}
	c.wg.Add(1)
	return true
}

// goCall runs fn (one ZooKeeper request) on its own goroutine, so the caller
// can stop waiting for it: go-zookeeper's requests take no context, and one
// queued during a disconnection waits for the reconnect. The caller must be
// tracked (c.track), which keeps Close waiting for fn too.
func goCall[T any](c *Client, fn func() (T, error)) <-chan result[T] {
	ch := make(chan result[T], 1)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		v, err := fn()
		ch <- result[T]{v, err}
	}()
	return ch
}

// await waits for a goCall result, the caller's ctx, or Close.
func await[T any](ctx context.Context, c *Client, ch <-chan result[T]) (T, error) {
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctxErr(ctx)
	case <-c.closing:
		var zero T
		return zero, ErrClosed
	}
}

func ctxErr(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("zklock: %w (%w)", ctx.Err(), cause)
	}
	return fmt.Errorf("zklock: %w", ctx.Err())
}

// retryable reports a request that failed because the connection dropped:
// the session may live on, so the request may be tried again.
func retryable(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrNoServer)
}

// sessionGone reports an error after which the session's ephemeral nodes are
// gone: it expired, or the connection was closed on purpose.
func sessionGone(err error) bool {
	return errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing)
}

// queueNode is one contender's ephemeral sequential node.
type queueNode struct {
	c     *Client
	path  string // the lock path
	name  string // the node's name under path
	guid  string
	seq   int64
	sess  *session
	owner Owner

	fetchOnce sync.Once
	fetched   chan struct{} // closed when the czxid fetch finished
	czxid     int64
	ownEv     <-chan zk.Event // the own-node watch, when set
	fetchErr  error
	removed   atomic.Bool
}

func (q *queueNode) full() string { return q.path + "/" + q.name }

func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// enqueue creates the caller's node and returns it with a listing of the lock
// path made after the create, or a nil listing if none is at hand. The create
// carries a fresh GUID so that, if its reply is lost, the node is found again
// instead of a second one being made (a second one would block the queue).
// On error nothing is left behind: a node that may exist is removed before
// enqueue returns, or within the cleanup timeout in the background.
func (c *Client) enqueue(ctx context.Context, lockPath string, owner Owner, sess *session) (*queueNode, []string, error) {
	q := &queueNode{c: c, path: lockPath, guid: newGUID(), sess: sess, owner: owner, fetched: make(chan struct{})}
	prefix := lockPath + "/" + protectedPrefix + q.guid + lockMarker
	data := owner.marshal()
	var listed <-chan result[[]string]
	var sid int64 // the session the node was created in
	for {
		listed = nil
		var written uint64
		if c.wire != nil {
			written = c.wire.writeCount()
		}
		created := goCall(c, func() (createdNode, error) {
			name, err := c.conn.Create(prefix, data, zk.FlagEphemeral|zk.FlagSequence, c.opts.acl)
			// A reply arrives on the connection's session of the moment: a
			// session change needs a reconnect, which fails pending requests.
			return createdNode{name, c.conn.SessionID()}, err
		})
		if c.wire != nil {
			// Send the listing right behind the create: ZooKeeper runs one
			// session's requests in order, so it sees the new node, and both
			// replies come back in one round trip.
			c.wire.waitWrite(written, 2*time.Millisecond)
			listed = goCall(c, func() ([]string, error) {
				ch, _, err := c.conn.Children(lockPath)
				return ch, err
			})
		}
		var name string
		var err error
		select {
		case r := <-created:
			name, sid, err = r.v.name, r.v.session, r.err
		case <-ctx.Done():
			c.abandonCreate(q, created)
			return nil, nil, ctxErr(ctx)
		case <-c.closing:
			c.abandonCreate(q, created)
			return nil, nil, ErrClosed
		}
		switch {
		case err == nil:
			q.name = name[len(lockPath)+1:]
		case errors.Is(err, zk.ErrNoNode):
			// The lock path does not exist yet, or a cleaner just removed it.
			if err := c.ensureParents(ctx, lockPath); err != nil {
				return nil, nil, err
			}
			continue
		case retryable(err):
			// The create may have happened with its reply lost: look for it.
			found, err := c.findByGUID(ctx, q, false)
			if err != nil {
				// Keep looking in the background, where nobody waits.
				c.abandonCreate(q, lostReply())
				return nil, nil, err
			}
			if found.name == "" {
				continue
			}
			q.name, sid = found.name, found.session
			listed = nil
		case sessionGone(err):
			if c.isClosed() {
				return nil, nil, ErrClosed
			}
			return nil, nil, errRequeue
		default:
			return nil, nil, fmt.Errorf("zklock: create lock node under %s: %w", lockPath, err)
		}
		break
	}
	if seq, ok := parseSeq(q.name); ok {
		q.seq = seq
	}
	// The node belongs to the session the create ran in, which need not be
	// the one the caller started with: go-zookeeper sends a request queued
	// during an expiry on the next session.
	sess, err := c.sessionFor(ctx, sid)
	if err != nil {
		if !errors.Is(err, errRequeue) {
			q.sess = c.session()
			c.abandon(q)
		}
		return nil, nil, err
	}
	q.sess = sess
	if c.opts.watchOwnNode {
		q.startFetch()
	}
	var children []string
	if listed != nil {
		if r, err := await(ctx, c, listed); err == nil && contains(r, q.name) {
			children = r
		} else if err != nil && !retryable(err) && !errors.Is(err, zk.ErrNoNode) && !sessionGone(err) {
			c.abandon(q)
			return nil, nil, err
		}
	}
	return q, children, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// createdNode is a create's outcome: the node's path and its session.
type createdNode struct {
	name    string
	session int64
}

// lostReply stands for a create whose reply was lost.
func lostReply() <-chan result[createdNode] {
	ch := make(chan result[createdNode], 1)
	ch <- result[createdNode]{err: zk.ErrConnectionClosed}
	return ch
}

// sessionFor returns the client's session with the given id, waiting for the
// event loop to catch up with go-zookeeper; errRequeue if that session is
// over (its ephemeral nodes are gone).
func (c *Client) sessionFor(ctx context.Context, id int64) (*session, error) {
	for {
		c.mu.Lock()
		s, ready := c.sess, c.ready
		c.mu.Unlock()
		if s.id == id {
			if s.ended() {
				return nil, errRequeue
			}
			return s, nil
		}
		if c.conn.SessionID() != id {
			return nil, errRequeue
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctxErr(ctx)
		case <-c.closing:
			return nil, ErrClosed
		}
	}
}

// findByGUID looks in the lock path for a node carrying q's GUID that belongs
// to the live session, after a create whose reply was lost. It returns a zero
// createdNode if there is none. In the background (nobody waiting, possibly
// during Close) it makes its requests directly and keeps going until it knows.
func (c *Client) findByGUID(ctx context.Context, q *queueNode, background bool) (createdNode, error) {
	list := func() ([]string, error) {
		// A follower may not have applied the lost create yet: catch it up.
		if _, err := c.conn.Sync(q.path); err != nil {
			return nil, err
		}
		ch, _, err := c.conn.Children(q.path)
		return ch, err
	}
	for {
		var children []string
		var err error
		if background {
			select {
			case <-c.connClosed:
				return createdNode{}, nil // the session is closed: nothing of it remains
			default:
			}
			children, err = list()
		} else {
			children, err = await(ctx, c, goCall(c, list))
		}
		switch {
		case err == nil:
		case retryable(err):
			time.Sleep(20 * time.Millisecond) // go-zookeeper is reconnecting
			continue
		case errors.Is(err, zk.ErrNoNode), sessionGone(err):
			return createdNode{}, nil
		default:
			return createdNode{}, err
		}
		again := false
		for _, name := range children {
			if !strings.Contains(name, q.guid) {
				continue
			}
			// A node of an expired session may linger a moment: adopt only
			// one that belongs to the live session.
			sid := c.conn.SessionID()
			_, stat, err := c.conn.Exists(q.path + "/" + name)
			switch {
			case err == nil && stat != nil && stat.EphemeralOwner == sid:
				return createdNode{name, sid}, nil
			case err != nil && !errors.Is(err, zk.ErrNoNode):
				again = true // unknown: look again rather than create a second node
			}
		}
		if !again {
			return createdNode{}, nil
		}
	}
}

// startFetch reads the node's creation zxid (the fencing token), setting the
// own-node watch when enabled, in the background: it needs the node's name, so
// it cannot ride with the create, but it can finish while the caller is
// already using the lock.
func (q *queueNode) startFetch() {
	q.fetchOnce.Do(func() {
		c := q.c
		if !c.track() {
			q.fetchErr = ErrClosed
			close(q.fetched)
			return
		}
		go func() {
			defer c.wg.Done()
			defer close(q.fetched)
			for {
				var stat *zk.Stat
				var err error
				if c.opts.watchOwnNode {
					_, stat, q.ownEv, err = c.conn.GetW(q.full())
				} else {
					_, stat, err = c.conn.Get(q.full())
				}
				if retryable(err) && !q.sess.ended() && !c.isClosed() {
					continue
				}
				if err != nil {
					q.fetchErr = err
					return
				}
				if stat.EphemeralOwner != q.sess.id {
					q.fetchErr = fmt.Errorf("%w: node %s belongs to session 0x%x, not 0x%x", ErrLockLost, q.full(), stat.EphemeralOwner, q.sess.id)
				}
				q.czxid = stat.Czxid
				return
			}
		}()
	})
}

// abandonCreate cleans up after a create whose outcome the caller stopped
// waiting for: once it is known, the node (if any) is removed.
func (c *Client) abandonCreate(q *queueNode, created <-chan result[createdNode]) {
	c.waitCleanup(func() {
		r := <-created
		switch {
		case r.err == nil:
			q.name = r.v.name[len(q.path)+1:]
		case retryable(r.err):
			found, _ := c.findByGUID(context.Background(), q, true)
			if found.name == "" {
				return
			}
			q.name = found.name
		default:
			return // never created, or gone with the session
		}
		q.sess = c.session()
		c.removeNode(q)
	})
}

// abandon removes a queue node the caller gives up.
func (c *Client) abandon(q *queueNode) {
	c.waitCleanup(func() { c.removeNode(q) })
}

// waitCleanup runs fn in the background and waits for it up to the cleanup
// timeout: on a healthy connection the node is gone when the caller returns;
// on a broken one the caller is not held hostage, and fn goes on (Close waits
// for it) until the node or its session is gone.
func (c *Client) waitCleanup(fn func()) {
	done := make(chan struct{})
	c.wg.Add(1) // callers are tracked, so the count is above zero
	go func() {
		defer c.wg.Done()
		defer close(done)
		fn()
	}()
	t := time.NewTimer(c.opts.cleanupTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		c.log.Warn("zklock: queue node removal still pending after the cleanup timeout; it goes on in the background")
	}
}

// removeNode deletes q's node, retrying across disconnections until the node
// or its session is gone. A delete is never sent on behalf of the caller's
// context: a cancelled caller must still not leave a node behind.
func (c *Client) removeNode(q *queueNode) error {
	if q.removed.Load() {
		return nil
	}
	for {
		err := c.conn.Delete(q.full(), -1)
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode), sessionGone(err):
			q.removed.Store(true)
			c.cleaner.schedule(q.path)
			return nil
		case retryable(err):
			select {
			case <-q.sess.lost:
				q.removed.Store(true) // gone with its session
				return nil
			case <-c.connClosed:
				return nil // Close ended the session: the server removes the node
			case <-time.After(50 * time.Millisecond):
			}
		default:
			c.log.Warn("zklock: deleting queue node failed", "node", q.full(), "err", err)
			return fmt.Errorf("zklock: delete %s: %w", q.full(), err)
		}
	}
}
