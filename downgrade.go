package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zklock/zklock/internal/wire"
)

// This file holds an RWMutex's downgrade from a write lease to a read lease:
// the reader's node, made beside the writer's and sorting at its place, and
// the writer's end.

// Downgrade turns w, a write lease of rw, into a read lease with no moment in
// which a writer could hold, as Curator 5.5 and later downgrade (CURATOR-621):
// a plain (not sequential) ephemeral reader node carrying the writer's
// sequence number, so that it sorts at the writer's place ahead of every
// waiter, is created in one transaction with a check that w's node still
// exists; then w's node is deleted. Readers queued behind w get in once it
// is gone; a writer behind it, zklock's or Curator's, waits for the reader.
//
// The read lease is a full lease (Done, Err, Token, Release, its own-node
// watch and loss rule) and Close releases it. It is not a new acquisition:
// under WithMaxHold it ends at w's grant plus the limit, and its record
// publishes what is left of the limit (Owner.MaxHold). Its Token is w's: the
// reader takes the writer's place in the queue, so its token must stay below
// that of every holder queued behind that place, a writer queued behind w
// included, whose node is older than the reader's; fencing tokens then grow
// for every later holder through a downgrade (docs/guarantees.md). w ends as
// released. Only a write lease of rw with Curator's names downgrades: one
// with KazooNames, or of another primitive or path or client, is refused
// with an error matching ErrInvalidArgument.
//
// Safety: the reader node is made only while w's node exists (else w is lost
// and Downgrade returns its loss), so it never sorts ahead of a later
// holder. If Downgrade fails before the reader exists, w is kept, held, and
// nothing is left behind: a transaction whose reply is lost is looked for by
// the reader's GUID, and one that ctx abandons is removed once its outcome
// is known, in the background if ZooKeeper does not answer. Once the reader
// exists Downgrade returns the read lease: if ctx ends while w's node is
// deleted, or w is lost meanwhile, w is over all the same (its delete goes
// on in the background, and readers behind it get in once it is done). If
// the server refuses that delete (an ACL without delete permission),
// Downgrade returns the read lease and that error: w stays held and watched,
// as after a refused Release, and releasing it finishes the downgrade.
//
// It waits for ZooKeeper at most ctx or the session timeout, like
// TryAcquire; it never waits for the lock. It costs 2 writes (the
// transaction and the writer's delete) and, with the own-node watch, 1 read
// (and the writer's token read first, if that is not known yet).
func (rw *RWMutex) Downgrade(ctx context.Context, w *Lease) (*Lease, error) {
	return opError("downgrade", rw.path)(rw.downgrade(ctx, w))
}

func (rw *RWMutex) downgrade(ctx context.Context, w *Lease) (*Lease, error) {
	if err := rw.canDowngrade(w); err != nil {
		return nil, err
	}
	c := rw.c
	ctx, scope, err := c.begin(ctx, true)
	if err != nil {
		return nil, err
	}
	defer scope.end()
	if err := w.Err(); err != nil {
		return nil, err
	}
	// The reader takes the writer's place in the queue, and so its token:
	// its node is newer than a writer queued behind w (lesson 37).
	token, err := w.Token(ctx)
	if err != nil {
		return nil, err
	}
	wn := w.onNode()
	q := &queueNode{c: c, path: wn.q.path, guid: c.me.newGUID(), seq: wn.q.seq, sess: wn.q.sess, owner: wn.q.owner, style: rw.read, fetched: make(chan struct{})}
	if q.owner.MaxHold > 0 {
		// A downgrade is not a new acquisition: the hold limit runs from
		// w's grant, and the reader publishes what is left of it, so that
		// a waiter breaking it as overdue counts from its stamp (at the
		// downgrade) only that.
		q.owner.MaxHold = max(q.owner.MaxHold-time.Since(wn.since), time.Millisecond)
	}
	name, _ := rw.read.AtPlaceOf(q.guid, wn.q.name) // canDowngrade parsed w's name
	q.setNodePath(q.path + "/" + name)
	if err := q.createBeside(ctx, w); err != nil {
		return nil, err
	}
	q.createZxid = token
	r := newLease(q, wn.since, nil)
	if r == nil {
		return nil, q.giveUp(ErrClosed)
	}
	if c.opts.watchOwnNode {
		q.startFetch()
	}
	switch err := w.Release(ctx); {
	case err == nil, errors.Is(err, ErrLockLost), errors.Is(err, ErrNotHeld), classify(err) == errStop:
		// w is over; a delete still under way goes on in the background.
	case w.held():
		return r, fmt.Errorf("zklock: downgrade: the write node %s stays, and its lease is still held (release it to finish): %w", w.Node(), err)
	}
	if err := r.Err(); err != nil {
		return nil, err // the session ended meanwhile: the reader went with it
	}
	return r, nil
}

// canDowngrade says why w cannot be downgraded by rw, or nil.
func (rw *RWMutex) canDowngrade(w *Lease) error {
	switch {
	case w == nil || w.h == nil || w.Parts()[0] != w || isReentrant(w): // no lease, a lease of parts, or of a hold
		return fmt.Errorf("%w: downgrade needs a write lease of an RWMutex", ErrInvalidArgument)
	case w.c != rw.c || w.onNode().q.path != rw.path || w.onNode().q.style != rw.write: // w.c: nil for a test double's
		return fmt.Errorf("%w: downgrade: %s is not a write lease of this RWMutex (%s)", ErrInvalidArgument, w.Node(), rw.path)
	case !rw.write.Downgrades():
		return fmt.Errorf("%w: downgrade: kazoo's WriteLock has no downgrade, and kazoo's readers would not see a reader at the writer's place (KazooNames)", ErrInvalidArgument)
	}
	if _, ok := rw.read.AtPlaceOf("", w.onNode().q.name); !ok {
		return fmt.Errorf("%w: downgrade: %s is not a lock node", ErrInvalidArgument, w.Node())
	}
	return nil
}

// createBeside makes q's node, a plain ephemeral one at the place of w's,
// in one transaction with a check that w's node exists. A transaction whose
// reply is lost is looked for by q's GUID, as a lost create is; one that the
// caller stops waiting for is removed once its outcome is known. If w's node
// is gone (its session ended, or someone deleted it), w is lost, and its
// loss is returned.
func (q *queueNode) createBeside(ctx context.Context, w *Lease) error {
	c := q.c
	r := c.retrier(ctx, q.sess)
	for {
		made := q.sendBeside(w.onNode().q)
		var res result[createdNode]
		select {
		case res = <-made:
		case <-ctx.Done():
			q.abandonCreate(made)
			return c.ctxErr(ctx)
		case <-c.closing:
			q.abandonCreate(made)
			return ErrClosed
		}
		var txn *refusedTxn
		switch {
		case res.err == nil:
			q.createZxid = res.v.czxid
			return nil
		case errors.As(res.err, &txn) && classify(txn.err) != errConnection:
			if lost := guardLoss([]*Lease{w}, txn.res, txn.err); lost != nil {
				return lost
			}
			return fmt.Errorf("zklock: downgrade: create %s: %w", q.full(), txn.err)
		}
		found, err := q.findByGUID(ctx, false) // the reply was lost: did it happen?
		switch {
		case err != nil:
			q.abandonCreate(lostReply()) // keep looking where nobody waits
			return err
		case found.name != "" && found.session == q.sess.id:
			q.createZxid = found.czxid
			return nil
		}
		if err := r.wait(); err != nil {
			if errors.Is(err, errSessionOver) {
				w.lose(c.sessionLoss())
				return w.Err()
			}
			return err
		}
	}
}

// refusedTxn is a downgrade transaction ZooKeeper answered with an error,
// with its ops' results.
type refusedTxn struct {
	res []zk.MultiResponse
	err error
}

func (e *refusedTxn) Error() string { return e.err.Error() }
func (e *refusedTxn) Unwrap() error { return e.err }

// sendBeside sends the transaction that makes q's node beside w's. The
// outcome names the node by its full path, as a create's does, so that
// abandonCreate can remove it.
func (q *queueNode) sendBeside(w *queueNode) <-chan result[createdNode] {
	c := q.c
	var sent *wire.Expectation
	if c.wire != nil {
		sent = c.wire.Expect(q.guid)
	}
	ops := []any{
		&zk.CheckVersionRequest{Path: w.full(), Version: -1},
		&zk.CreateRequest{Path: q.full(), Data: q.owner.marshal(), Acl: c.opts.acl, Flags: zk.FlagEphemeral},
	}
	return goCall(c, func() (createdNode, error) {
		before := c.conn.SessionID()
		res, err := c.conn.Multi(ops...)
		n := createdNode{name: q.full(), session: c.conn.SessionID()}
		if sent != nil {
			n.czxid = sent.ReplyZxid() // the transaction's zxid: the node's creation zxid
			c.wire.Forget(q.guid)
		}
		switch {
		case err == nil && n.session != before:
			// As for a create: which session the node is in is unknown.
			return createdNode{}, fmt.Errorf("zklock: the session changed while a downgrade was out: %w", zk.ErrConnectionClosed)
		case len(res) > 1 && errors.Is(res[1].Error, zk.ErrNodeExists):
			// The check passed and the name carries q's GUID: an earlier
			// attempt, whose reply was lost, made the node. That outcome is
			// settled as a lost reply's is: by looking for the GUID.
			return createdNode{}, fmt.Errorf("zklock: %s made by an earlier attempt: %w", q.full(), zk.ErrConnectionClosed)
		case err != nil:
			return createdNode{}, &refusedTxn{res, err}
		}
		return n, nil
	})
}
