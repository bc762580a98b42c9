package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// This file holds how a lease is lost: the monitor that ends a lease when
// its lock goes (the session ends, the node is deleted, the own-node watch
// ends), the reasons it reports, and the loss rule (lossCheck) with the
// deadline the loss clock (lossclock.go) counts down to, and the end of a
// holder broken past its hold limit (overdueEnd; the waiter that breaks it
// is in overdue.go). The lease's states and their transitions are in
// lease.go; the holding they watch is leasenode.go's.

// monitor ends the lease when the lock is lost: the session expires, the node
// is deleted by someone else, or contact with the server has been lost for so
// long that the session may have expired (see lossCheck). It runs until the
// lease has ended, including while a Release is under way.
func (l *Lease) monitor() {
	c := l.c
	defer c.wg.Done()
	n := l.onNode()
	q := n.q
	fetched := q.fetched // without the own-node watch, closed only if Token reads the node
	sessLost, presumed := q.sess.lost, n.presumed
	var w ownWatchState
	limit, stopLimit := l.holdLimit()
	defer stopLimit()
	dataWanted := n.dataWatch.nodeWatchRequested() // a listing-watched lease's RevokeRequested
	for {
		var lost error
		select {
		case <-l.done:
			return
		case <-fetched:
			fetched = nil
			if !w.onNode { // a read for RevokeRequested may have set the node's watch first
				w.own = q.ownEv
			}
			if q.fetchErr != nil {
				lost = fetchLost(q.full(), q.fetchErr)
			}
			if q.revokeAsked {
				l.revokeRequested()
			}
		case ev := <-w.own:
			lost = w.onWatchEvent(l, ev)
		case <-dataWanted:
			dataWanted = nil
			w.onNodeWatchWanted(l)
		case r := <-w.rewatch:
			lost = w.onRewatch(l, r)
		case <-w.again:
			w.onRetryTimer(l)
		case <-sessLost:
			sessLost, lost = nil, q.lossCheck()
		case <-presumed:
			presumed, lost = nil, fmt.Errorf("%w: connection to ZooKeeper lost", ErrLockLost)
		case <-c.clock.current():
			lost = q.lossCheck()
		case <-limit:
			limit, lost = nil, fmt.Errorf("%w: held for %v", ErrHoldLimit, c.opts.maxHold)
		}
		if lost != nil {
			l.lose(lost) // ends the lease, or waits for a Release's outcome
		}
	}
}

// listRecheck is how often a monitor looks again, after a child event seen
// during a Release, whether the Release is over.
const listRecheck = 10 * time.Millisecond

// ownWatchState is the monitor's own-node watch: the channel it waits on,
// the read setting it again, and the next attempt after a failed one.
type ownWatchState struct {
	own     <-chan zk.Event
	rewatch <-chan result[ownWatch]
	again   <-chan time.Time
	delay   backoff // between attempts to set the watch again
	onNode  bool    // own is a watch on the node itself, set by a read
}

// onWatchEvent handles an event of the watch and returns the loss it means, if any.
func (w *ownWatchState) onWatchEvent(l *Lease, ev zk.Event) error {
	w.own = nil
	lost := l.ownNodeEvent(ev)
	switch {
	case lost != nil, w.rewatch != nil:
	case ev.Type == zk.EventNodeChildrenChanged && !l.held():
		w.again = time.After(listRecheck) // most likely the Release's own delete (listwatch.go)
	default:
		w.rewatch = l.watchOwnNode()
	}
	return lost
}

// onRewatch handles the outcome of a read that set the watch again.
func (w *ownWatchState) onRewatch(l *Lease, r result[ownWatch]) error {
	w.rewatch = nil
	switch {
	case r.err == nil:
		w.own, w.delay, w.onNode = r.v.ev, 0, true
		if isRevokeRequest(r.v.data) {
			l.revokeRequested()
		}
	case errors.Is(r.err, zk.ErrNoNode):
		return deletedByOther(l.onNode().q.full())
	case errors.Is(r.err, zk.ErrNoAuth):
		// A node its holder may not read cannot be watched: as when the
		// first read of the node fails so (a lease watched through its
		// listing makes its first read here).
		return fetchLost(l.onNode().q.full(), r.err)
	default: // never give the watch up: the loss checks cover the session meanwhile
		w.again = time.After(w.delay.next())
	}
	return nil
}

// onRetryTimer sets the watch again, unless a lease watched through its listing
// is being released (listwatch.go): then it looks again later.
func (w *ownWatchState) onRetryTimer(l *Lease) {
	w.again = nil
	if l.onNode().q.listWatched && !l.held() {
		w.again = time.After(listRecheck)
		return
	}
	w.rewatch = l.watchOwnNode()
}

// onNodeWatchWanted replaces a listing's watch with the own-node watch, which hears
// requests to release (RevokeRequested).
func (w *ownWatchState) onNodeWatchWanted(l *Lease) {
	if l.onNode().q.listWatched && !w.onNode && w.rewatch == nil && w.again == nil {
		w.rewatch = l.watchOwnNode()
	}
}

// ownNodeEvent turns an event of the own-node watch into the loss it means,
// or nil when the node is still there (its data changed: watch again).
func (l *Lease) ownNodeEvent(ev zk.Event) error {
	c := l.c
	switch {
	case ev.Type == zk.EventNodeDeleted:
		if c.wire != nil && c.clock.untilLossDeadlineOf(l.onNode().q.sess.id) <= 0 {
			// Woken after a pause: the server expired the session and
			// deleted the node itself.
			return fmt.Errorf("%w: no word from ZooKeeper's leader for longer than the session can be trusted (node %s is gone)", ErrLockLost, l.onNode().q.full())
		}
		return deletedByOther(l.onNode().q.full())
	case ev.Type == zk.EventNotWatching:
		if c.isClosed() {
			return ErrClosed
		}
		return fmt.Errorf("%w: watch on %s ended: %w", ErrLockLost, l.onNode().q.full(), ev.Err)
	}
	return nil
}

// ownWatch is the own-node watch set again, with the data it read.
type ownWatch struct {
	ev   <-chan zk.Event
	data []byte
}

// watchOwnNode sets the own-node watch again, without blocking the monitor.
func (l *Lease) watchOwnNode() <-chan result[ownWatch] {
	c, node := l.c, l.onNode().q.full()
	return goCall(c, func() (ownWatch, error) {
		if hook := testHookRewatch.Load(); hook != nil {
			(*hook)()
		}
		data, _, ch, err := c.conn.GetW(node)
		return ownWatch{ch, data}, err
	})
}

// testHookRewatch, set only by tests, runs before the own-node watch is set
// again after it fired.
var testHookRewatch atomic.Pointer[func()]

// fetchLost turns a failed read of the lease's own node into the loss it means.
func fetchLost(node string, err error) error {
	switch {
	case errors.Is(err, ErrLockLost), errors.Is(err, ErrClosed):
		return err
	case errors.Is(err, zk.ErrNoNode):
		return deletedByOther(node)
	case errors.Is(err, zk.ErrSessionExpired):
		return fmt.Errorf("%w: session expired: %w", ErrLockLost, err)
	default:
		return fmt.Errorf("%w: reading %s: %w", ErrLockLost, node, err)
	}
}

// lossCheck is the loss rule: why a lease on q must be presumed lost now, or
// nil. It needs no event: it reads the session id and the wire clock.
func (q *queueNode) lossCheck() error {
	c := q.c
	switch {
	case c == nil: // a lease kept outside ZooKeeper (NewLease): its backend ends it
		return nil
	case q.sess.ended() || c.conn.SessionID() != q.sess.id:
		return c.sessionLoss()
	case c.wire != nil:
		if c.clock.untilLossDeadlineOf(q.sess.id) <= 0 {
			return errPresumedLost
		}
	case c.conn.State() != zk.StateHasSession:
		return fmt.Errorf("%w: connection to ZooKeeper lost", ErrLockLost)
	}
	return nil
}

// errPresumedLost is the loss rule's end: no word from the leader for as
// long as a session is trusted. The session may live on.
var errPresumedLost = fmt.Errorf("%w: no word from ZooKeeper's leader for longer than the session can be trusted", ErrLockLost)

// sessionLoss is the end of a lease whose session is over.
func (c *Client) sessionLoss() error {
	switch {
	case c.isClosed():
		return ErrClosed
	case c.session.connIsEnded():
		return fmt.Errorf("%w: the connection was closed", ErrLockLost)
	}
	return fmt.Errorf("%w: session expired: %w", ErrLockLost, zk.ErrSessionExpired)
}

// holdLimit fires when the lease has been held for the client's hold limit
// (WithMaxHold); nil without one, and for a lease zklock takes for a moment
// on its own behalf (a semaphore's turnstile).
func (l *Lease) holdLimit() (<-chan time.Time, func() bool) {
	d, n := l.c.opts.maxHold, l.onNode()
	if d <= 0 || n.q.brief {
		return nil, func() bool { return false }
	}
	t := time.NewTimer(d - time.Since(n.since))
	return t.C, t.Stop
}

// stampGrant writes the lease's record back marked Held, so that waiters
// can read the grant on the server's clock; only with a hold limit. A
// record someone changed since the create (a request to release) is left:
// that holder is then never broken.
func (l *Lease) stampGrant() {
	q := l.onNode().q
	if l.c.opts.maxHold <= 0 || q.brief {
		return
	}
	rec := q.owner
	rec.Held = true
	data := rec.marshal()
	l.c.inBackground(func() {
		_, _ = l.c.conn.Set(q.full(), data, 0)
	})
}

// traceHold gives the lease its hold span; a lease that ended already (lost
// between the grant and now) ends the span at once.
func (l *Lease) traceHold(h HoldSpan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == leaseEnded {
		h.Ended(l.err)
		return
	}
	l.hold = h
}

// deadline is Deadline: the zero time on a client made by NewClient.
func (n *nodeHolding) deadline() time.Time {
	c := n.q.c
	if c.wire == nil {
		return time.Time{}
	}
	if n.l.Err() != nil {
		return time.Now().Add(-time.Nanosecond)
	}
	return time.Now().Add(c.clock.untilLossDeadlineOf(n.q.sess.id))
}

// lateLimit is how late past its hold limit a lease must end for it to be
// taken for broken as overdue: a timer that late means the process could
// not run (stopped, a frozen VM), and a waiter's grace (half its own session
// timeout) may be short.
const lateLimit = 100 * time.Millisecond

// overdueEnd is the end err of a lease, as lose is given it, or the end of a
// holder broken as overdue: one that was past its hold limit by lateLimit
// (its process could not run) when its node was found deleted by someone
// else, or when its limit fired and its node, read then, was gone already
// in the same session. Both orders, whichever the monitor saw first, end
// the lease the same: with ErrHoldLimit saying so, wrapping zk.ErrNoNode.
// Only a late limit costs a read, bounded by a second (or a quarter of the
// session timeout) and made only while connected.
func (l *Lease) overdueEnd(err error) error {
	c, n := l.c, l.onNode()
	if c == nil || n == nil || n.q.brief || c.opts.maxHold <= 0 {
		return err
	}
	q, held := n.q, time.Since(n.since)
	limit, deleted := errors.Is(err, ErrHoldLimit), isNodeDeleted(err)
	if !limit && !deleted || held-c.opts.maxHold < lateLimit {
		return err
	}
	if !l.held() { // a Release is under way
		return err
	}
	if limit {
		if c.conn.State() != zk.StateHasSession || q.lossCheck() != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(c.grantedTimeout()/4, time.Second))
		defer cancel()
		there, rerr := call(ctx, c, func() (bool, error) {
			ok, _, err := c.conn.Exists(q.full())
			return ok, err
		})
		if rerr != nil || there || q.lossCheck() != nil {
			return err
		}
	}
	return fmt.Errorf("%w: held for %v, past the limit of %v: broken by a waiter past the limit while the process could not run (node %s was deleted by someone else): %w",
		ErrHoldLimit, held.Round(time.Millisecond), c.opts.maxHold, q.full(), zk.ErrNoNode)
}
