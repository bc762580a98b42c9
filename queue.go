package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock/internal/lockpath"
	"github.com/zklock/zklock/internal/wire"
)

// This file holds the queue node's life: the protected create, the listing
// pipelined behind it, and the read of the own node (fencing token, own-node
// watch). Its removal is in remove.go.

// errNodeDeleted means the caller's queue node was deleted by someone else
// while its session lived on: it may queue again, at the back.
var errNodeDeleted = errors.New("zklock: queue node deleted by someone else")

// queueNode is one contender's ephemeral sequential node.
type queueNode struct {
	c     *Client
	path  string // the lock path
	name  string // the node's name under path
	node  string // path + "/" + name, set with name (setNodePath)
	guid  string
	seq   int64
	sess  *session
	owner Owner
	style lockpath.Style
	brief bool // a semaphore's turnstile: not reported to Metrics

	watchListing bool            // the first listing sets a child watch (listwatch.go)
	listEv       <-chan zk.Event // that watch, when the first listing set it and showed q's node
	heldAtOnce   bool            // q granted by its first listing: no wait, no other listing
	listWatched  bool            // listEv is the lease's own-node watch (listwatch.go)

	startOnce sync.Once     // one background read at most
	fetchOnce sync.Once     // one outcome
	fetched   chan struct{} // closed when the own-node read finished
	czxid     int64
	// createZxid is the creation zxid read off the create's reply (0: not
	// known; the own-node read gives it then). It is the fencing token.
	createZxid int64
	ownEv      <-chan zk.Event // the own-node watch, when set
	// revokeAsked: the own-node read found a request to release (revoke.go).
	revokeAsked bool
	fetchErr    error
	removed     atomic.Bool

	// ownEpoch is the wire's connection epoch just before a waiter sent its
	// own-node read (0: the read was not made while waiting, or there is no
	// wire). While the epoch is unchanged, every event since came in the
	// server's order on one connection (see ownWatchProves).
	ownEpoch uint64
	// proof is what a grant by hand-off rested on (see holdIfProven).
	proof     handOffProof
	trace     AcquireSpan // the acquisition's trace, nil unless the client traces
	waitedFor string      // the last trace context reported to it
	// clock bounds the server's time from below, once a waiter needed it
	// to break a holder past its limit (overdue.go).
	clock serverClock
}

// handOffProof records, for a grant made when the last node ahead went,
// which read of the own node proved the node still there: one sent on
// connection epoch read, with the grant on epoch grant. after: the read was
// made after the node ahead was seen gone (confirmHead), so it proves the
// node there whatever connection delivered the deletion; otherwise the order
// of one connection's events proves it, and read must equal grant.
type handOffProof struct {
	read, grant uint64
	after       bool
}

func (q *queueNode) full() string { return q.node }

// setNodePath records the node's full path and its name under the lock path.
func (q *queueNode) setNodePath(full string) {
	q.node, q.name = full, full[len(q.path)+1:]
}

// enqueue creates the caller's node and returns it with a listing of the lock
// path made after the create, or a nil listing if none is at hand. The create
// carries a fresh GUID so that, if its reply is lost, the node is found again
// instead of a second one being made (a second one would block the queue).
// On error nothing is left behind: a node that may exist is removed before
// enqueue returns, or within the cleanup timeout in the background.
func (c *Client) enqueue(ctx context.Context, a ask, sess *session) (*queueNode, []string, error) {
	lockPath := a.path
	q := &queueNode{c: c, path: lockPath, guid: c.me.newGUID(), sess: sess, owner: a.owner, style: a.style, brief: a.policy.brief(), trace: a.trace, watchListing: a.watchListing, fetched: make(chan struct{})}
	node, listed, err := q.create(ctx)
	if err != nil {
		return nil, nil, err
	}
	q.setNodePath(node.name)
	q.seq, _ = lockpath.Seq(q.name)
	q.createZxid = node.czxid
	// The node belongs to the session the create ran in, which need not be
	// the one the caller started with: go-zookeeper sends a request queued
	// during an expiry on the next session.
	if q.sess, err = c.session.byID(ctx, node.session); err != nil {
		// Delete by name even when the session looks over: the view may be
		// stale, and a node that is gone costs one NoNode.
		q.sess = c.session.current()
		_ = q.abandon()
		return nil, nil, err
	}
	if listed == nil {
		return q, nil, nil
	}
	l, err := await(ctx, c, listed)
	if classify(err) == errStop {
		_ = q.abandon()
		return nil, nil, err
	}
	if err != nil || !contains(l.children, q.name) {
		return q, nil, nil // waitTurn lists again
	}
	q.listEv = l.ev
	return q, l.children, nil
}

// create makes q's node, creating the lock path if needed and recovering a
// create whose reply was lost. It returns the node's full path and session,
// and the listing sent right behind the create, if any.
func (q *queueNode) create(ctx context.Context) (createdNode, <-chan result[firstListing], error) {
	c := q.c
	prefix := q.path + "/" + q.style.Prefix(q.guid)
	data := q.owner.marshal()
	r := c.retrier(ctx, q.sess)
	for {
		created, listed := c.sendCreate(ctx, q.path, prefix, q.guid, data, q.watchListing)
		var res result[createdNode]
		select {
		case res = <-created:
		case <-ctx.Done():
			q.abandonCreate(created)
			return createdNode{}, nil, c.ctxErr(ctx)
		case <-c.closing:
			q.abandonCreate(created)
			return createdNode{}, nil, ErrClosed
		}
		err := res.err
		switch classify(err) {
		case errNone:
			return res.v, listed, nil
		case errConnection:
			// The create may have happened with its reply lost: look for it.
			found, ferr := q.findByGUID(ctx, false)
			if ferr != nil {
				q.abandonCreate(lostReply()) // keep looking where nobody waits
				return createdNode{}, nil, ferr
			}
			if found.name != "" {
				found.name = q.path + "/" + found.name
				return found, nil, nil
			}
		case errSession:
			return createdNode{}, nil, errSessionOver
		default:
			if !errors.Is(err, zk.ErrNoNode) {
				return createdNode{}, nil, fmt.Errorf("zklock: create lock node under %s: %w", q.path, err)
			}
			// The lock path does not exist yet, or a cleaner just removed it.
			if err := c.parents.ensure(ctx, q.path); err != nil {
				c.cleaner.schedule(q.path) // the ancestors it did create
				return createdNode{}, nil, err
			}
			continue
		}
		if err := r.wait(); err != nil {
			return createdNode{}, nil, err
		}
	}
}

// sendCreate sends the create and, when the wire can tell that it has left,
// the listing right behind it: ZooKeeper runs one session's requests in
// order, so the listing sees the new node, and both replies come back in one
// round trip.
func (c *Client) sendCreate(ctx context.Context, lockPath, prefix, guid string, data []byte, watch bool) (<-chan result[createdNode], <-chan result[firstListing]) {
	var sent *wire.Expectation
	if c.wire != nil {
		sent = c.wire.Expect(guid)
	}
	replied := make(chan struct{}) // the create has its outcome
	created := goCall(c, func() (createdNode, error) {
		defer close(replied)
		before := c.conn.SessionID()
		name, err := c.conn.Create(prefix, data, zk.FlagEphemeral|zk.FlagSequence, c.opts.acl)
		if hook := testHookAfterCreate.Load(); hook != nil {
			(*hook)()
		}
		// A reply arrives on the connection's session of the moment (a
		// session change needs a reconnect, which fails pending requests),
		// but the session is read after the reply: if it changed meanwhile,
		// which session the node belongs to is unknown. Then the node is
		// looked for as after a lost reply, and adopted only if the live
		// session owns it.
		n := createdNode{name: name, session: c.conn.SessionID()}
		if err == nil && n.session != before {
			return createdNode{}, fmt.Errorf("zklock: the session changed while a create was out: %w", zk.ErrConnectionClosed)
		}
		if sent != nil {
			// The wire parsed the reply before go-zookeeper read it: its
			// zxid, the create's, is the node's creation zxid.
			n.czxid = sent.ReplyZxid()
		}
		return n, err
	})
	if c.wire == nil {
		return created, nil
	}
	written := sent.Seen()
	// Usually the create is on the socket within microseconds. A listing
	// sent before the create would not see the node and cost a second
	// listing (and the lease a read of its node), which is why the wait is
	// for this create's packet, not for any of the client's. Waiting costs
	// nothing: the acquisition needs the create's outcome, which comes after
	// the packet, or ends the wait (a create failed before it was sent).
	// The cap only bounds a packet never seen; 20 ms was too short for a
	// CPU-starved process, whose create went out after it.
	t := createWaits.Get().(*time.Timer)
	t.Reset(createSentCap)
	gaveUp := false // the caller gives up on the create: no listing
	select {
	case <-written:
	case <-t.C:
		c.wire.Forget(guid)
	case <-replied:
		c.wire.Forget(guid) // unless its packet was seen just before
	case <-ctx.Done():
		gaveUp = true
	case <-c.closing:
		gaveUp = true
	}
	t.Stop() // since Go 1.23, a stopped timer's channel holds nothing stale
	createWaits.Put(t)
	if gaveUp {
		c.wire.Forget(guid)
		return created, nil
	}
	listed := goCall(c, func() (firstListing, error) {
		if watch {
			children, _, ev, err := c.conn.ChildrenW(lockPath)
			return firstListing{children, ev}, err
		}
		children, _, err := c.conn.Children(lockPath)
		return firstListing{children: children}, err
	})
	return created, listed
}

// createSentCap is how long a listing waits for its create's packet to
// leave.
const createSentCap = 250 * time.Millisecond

// createWaits are the stopped timers of sendCreate's wait, shared by every
// client: a timer a create saves (about 200 bytes each).
var createWaits = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// testHookAfterCreate, set only by tests, runs between a create's reply and
// the reading of its session.
var testHookAfterCreate atomic.Pointer[func()]

// ownRead is one read of the own node.
type ownRead struct {
	czxid int64
	owner int64 // the session the node belongs to
	ev    <-chan zk.Event
	data  []byte
}

// readOwn reads q's node once, setting the own-node watch when enabled and
// not set already.
func (q *queueNode) readOwn() (ownRead, error) {
	c := q.c
	if c.opts.watchOwnNode && !isDone(q.fetched) {
		data, stat, ev, err := c.conn.GetW(q.full())
		if err != nil {
			return ownRead{}, err
		}
		return ownRead{stat.Czxid, stat.EphemeralOwner, ev, data}, nil
	}
	data, stat, err := c.conn.Get(q.full())
	if err != nil {
		return ownRead{}, err
	}
	return ownRead{czxid: stat.Czxid, owner: stat.EphemeralOwner, data: data}, nil
}

// finishFetch records the outcome of the own-node read, once.
func (q *queueNode) finishFetch(r ownRead, err error) {
	q.fetchOnce.Do(func() {
		q.czxid, q.ownEv, q.fetchErr = r.czxid, r.ev, err
		q.revokeAsked = isRevokeRequest(r.data)
		if err == nil && r.owner != q.sess.id {
			q.fetchErr = fmt.Errorf("%w: node %s belongs to session 0x%x, not 0x%x", ErrLockLost, q.full(), r.owner, q.sess.id)
		}
		close(q.fetched)
	})
}

// startFetch reads the node's creation zxid (the fencing token), setting the
// own-node watch when enabled, in the background: it needs the node's name, so
// it cannot ride with the create, but it can finish while the caller is
// already using the lock.
func (q *queueNode) startFetch() { q.startOnce.Do(q.fetchInBackground) }

func (q *queueNode) fetchInBackground() {
	c := q.c
	select {
	case <-q.fetched:
		return // confirmHead read it already
	default:
	}
	if !c.track() {
		q.finishFetch(ownRead{}, ErrClosed)
		return
	}
	go func() {
		defer c.wg.Done()
		r := c.retrier(context.Background(), q.sess)
		for {
			res, err := q.readOwn()
			if classify(err) != errConnection {
				q.finishFetch(res, err)
				return
			}
			if werr := r.wait(); werr != nil {
				q.finishFetch(res, err)
				return
			}
		}
	}()
}

// knownToken is the fencing token if known without a request: off the
// create's reply, or from the own-node read if it has finished; else 0.
func (q *queueNode) knownToken() int64 {
	if q.createZxid != 0 {
		return q.createZxid
	}
	if isDone(q.fetched) && q.fetchErr == nil {
		return q.czxid
	}
	return 0
}
