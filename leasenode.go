package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// nodeHolding is the holding of a lease on one lock node: the queue node
// it was granted on, with the grant's moment, the keep-alive's demand, the
// loss monitor (leaseloss.go) and the delete that gives it up (remove.go).
// Its lease is registered with the client, which presumes it lost when the
// connection drops and releases it on Close.
type nodeHolding struct {
	l      *Lease
	q      *queueNode
	since  time.Time // granted
	unkeep func()    // ends the keep-alive's demand (keepalive.go)

	presumed    chan struct{} // closed when the connection dropped and there is no wire clock; nil with one
	presumeOnce sync.Once

	// dataWatch, for a lease watched through its listing (listwatch.go),
	// asks its monitor for the own-node watch that hears revoke.
	dataWatch *dataWatch
}

// newLease registers q, granted at since, as a held lease of its client and
// starts its monitor; nil if the client is closing. wrap, if not nil, gives
// the lease its holding made around the node's (a reentrant hold). A lease
// that must already be presumed lost (a pause between the grant and now, a
// connection that just dropped) is returned with Done closed. A downgraded
// reader's since is the writer's grant: its hold limit runs from there.
func newLease(q *queueNode, since time.Time, wrap func(*nodeHolding) holding) *Lease {
	c := q.c
	l := newLeaseState(c)
	n := &nodeHolding{l: l, q: q, since: since, dataWatch: newDataWatch(q.listWatched)}
	l.h = n
	if wrap != nil {
		l.h = wrap(n)
	}
	if c.wire == nil { // with the wire clock, nothing closes it: a lease of Connect's does without
		n.presumed = make(chan struct{})
	}
	n.unkeep = c.keep.want(true) // before register: Close may forget l at once
	if !c.register(l) {
		n.unkeep()
		return nil
	}
	if err := q.lossCheck(); err != nil {
		l.lose(err)
	}
	l.stampGrant()
	go l.monitor()
	return l
}

// onNode returns the holding itself; a holding made around it (a
// reentrant hold) returns it too.
func (n *nodeHolding) onNode() *nodeHolding { return n }

// onNode returns l's node holding, or nil for a lease that has no node of
// its own (a MultiLock's, a test double's).
func (l *Lease) onNode() *nodeHolding {
	if h, ok := l.h.(interface{ onNode() *nodeHolding }); ok {
		return h.onNode()
	}
	return nil
}

func (n *nodeHolding) node() string    { return n.q.full() }
func (n *nodeHolding) sequence() int64 { return n.q.seq }
func (n *nodeHolding) listen()         { n.dataWatch.requestNodeWatch() }

func (n *nodeHolding) ending(err error) {
	if !n.q.brief {
		n.q.c.opts.metrics.Ended(n.q.style.Kind, time.Since(n.since), err)
	}
}

func (n *nodeHolding) err() error {
	if err, ended := n.l.ended(); ended {
		return err
	}
	if lerr := n.q.lossCheck(); lerr != nil {
		n.l.lose(lerr)
	}
	err, _ := n.l.ended()
	return err
}

func (n *nodeHolding) token(ctx context.Context) (int64, error) {
	t, err := n.readToken(ctx)
	if err != nil {
		return 0, err
	}
	if err := n.l.Err(); err != nil {
		return 0, err // a token is a claim to hold the lock: never one of an ended lease
	}
	return t, nil
}

// readToken returns the node's creation zxid, reading the node if the
// create's reply did not carry it.
func (n *nodeHolding) readToken(ctx context.Context) (int64, error) {
	q := n.q
	if t := q.createZxid; t != 0 {
		return t, nil // read off the create's reply
	}
	q.startFetch() // already under way unless the own-node watch is off
	select {
	case <-q.fetched:
	case <-ctx.Done():
		return 0, q.c.ctxErr(ctx)
	case <-n.l.done:
		if !isDone(q.fetched) {
			return 0, n.l.Err()
		}
	}
	if q.fetchErr != nil {
		return 0, fetchLost(q.full(), q.fetchErr) // the monitor ends the lease with the same
	}
	return q.czxid, nil
}

// presumeLost is called from the event goroutine when the connection dropped
// and there is no wire clock; it must not block.
func (l *Lease) presumeLost() {
	if n := l.onNode(); n != nil && n.presumed != nil {
		n.presumeOnce.Do(func() { close(n.presumed) })
	}
}

// release deletes the node: Release of a plain lease, the last hold's of
// a reentrant one.
func (n *nodeHolding) release(ctx context.Context) error {
	l := n.l
	if l.held() {
		if lerr := n.q.lossCheck(); lerr != nil {
			l.lose(lerr) // a lease that must be presumed lost is not released but lost
		}
	}
	if err := l.beginRelease(); err != nil {
		return err
	}
	how, err := n.q.removeWithin(ctx, l.done)
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
		return fmt.Errorf("zklock: release %s: %w", n.q.full(), err)
	}
	return l.endRelease(how)
}

// endRelease applies how the node went: only our own delete makes a
// release; a node someone else deleted, or a session that ended, is the loss
// it is. A loss that ended the lease meanwhile stands. It returns what
// Release returns.
func (l *Lease) endRelease(how removal) error {
	n := l.onNode()
	end, ended := l.finishRelease(func(deferred error) error {
		switch how {
		case removedByOther:
			if deferred != nil {
				return deferred
			}
			return deletedByOther(n.q.full())
		case removedWithSession:
			return l.c.sessionLoss()
		}
		return ErrReleased
	})
	if ended {
		l.forget()
	}
	return end
}

// refusedRelease handles a delete the server refused: the node is still
// there, so the lease is held again and still watched, and a node-deleted
// loss seen meanwhile takes effect. Once Close has begun, the lease ends
// instead: closing the session removes the node. It returns what Release
// reports: the loss, if one ended the lease meanwhile, or delErr.
func (l *Lease) refusedRelease(delErr error) error {
	ended, deferred, closed := l.refuse()
	switch {
	case ended != nil:
		return ended
	case closed:
		l.forget()
	case deferred != nil:
		l.lose(deferred)
	}
	return delErr
}

// lose ends the lease with err (a loss, or the hold limit) and removes its
// node in the background if the session may still hold it, so the queue
// behind it moves. While a Release is deleting the node, a node-deleted
// loss may be that very delete: it waits for the delete's outcome (see
// endByLoss).
func (l *Lease) lose(err error) {
	err = l.overdueEnd(err)
	ended, releasing := l.endByLoss(err)
	if !ended {
		return
	}
	c, n := l.c, l.onNode()
	if errors.Is(err, ErrHoldLimit) {
		c.log.Info("zklock: hold limit reached; releasing", "node", n.q.full(), "limit", c.opts.maxHold)
	} else {
		c.log.Warn("zklock: lock lost", "node", n.q.full(), "err", err)
	}
	l.forget()
	if !releasing { // a Release is deleting it already
		// Delete by name even if the session seems over: the name carries
		// our GUID, and a node that is already gone costs one NoNode.
		n.q.removeInBackground(l.keepNodeFor(err))
	}
}

// keepNodeFor is how long a lost lease's node stays: until its session may
// have expired, when the loss is only presumed (no word from the leader for
// 0.8 T). Deleting it at once would let the next waiter in while the
// holder may still be in its critical section: the loss deadline is when
// the holder must start to stop, and the 0.2 T left until the session can
// expire is the holder's to finish (zklock exec kills its command by 0.9
// T). Any other end (the node deleted, the session over, a hold limit, a
// refused read) deletes it at once.
func (l *Lease) keepNodeFor(err error) time.Duration {
	if l.c.wire == nil || !errors.Is(err, errPresumedLost) {
		return 0
	}
	return l.c.clock.untilExpiryOf(l.onNode().q.sess.id)
}

// forget takes l off its client's held leases.
func (l *Lease) forget() {
	l.c.forget(l)
	if n := l.onNode(); n != nil && n.unkeep != nil {
		n.unkeep()
	}
}

// releaseOnClose ends a lease still held when its client closes, and deletes
// its node within ctx.
func (l *Lease) releaseOnClose(ctx context.Context) {
	if !l.endOnClose() {
		return
	}
	l.forget()
	n := l.onNode()
	if _, err := n.q.removeWithin(ctx, nil); err != nil && classify(err) != errStop {
		l.c.log.Warn("zklock: removing a lease's node on close", "node", n.q.full(), "err", err)
	}
}
