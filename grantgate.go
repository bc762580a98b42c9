package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// This file holds the last step of a grant: a node whose turn came is made a
// lease only while the loss rule says the lease would be live. A waiter woken
// after a stall (its own, or its servers') may hold the lock in ZooKeeper's
// view while the client can no longer prove that the leader still keeps its
// session; a lease made then would end at once, and a caller that missed
// that would run its critical section beside the next holder. So the grant
// waits, within the caller's context, for the leader's word (the keep-alive
// asks for it while an acquisition is under way), and gives the node up if
// the word does not come in time or the session turns out to be over.
//
// The interleavings, and what awaitLive does:
//   - the leader's word comes (the stall ended, the session lived) and
//     leaves the lease a twentieth of the session timeout at least: grant,
//     once a read shows the node is still there (someone may have deleted
//     it during the wait, and the next waiter been granted);
//   - the session is over (expired during the stall): errSessionOver, so the
//     caller queues again at the back or reports it (its node went with it);
//   - no word for a whole session timeout (a link too slow to prove
//     anything): errNoWord; the node is given up and the caller queues again
//     at the back, so that the waiters behind are not held up by a client
//     that cannot hold the lock;
//   - ctx ends first (the leader still silent): ErrUnreachable with ctx's
//     cause, and the node is removed by the caller (giveUp);
//   - Close: ErrClosed.

// livePoll is how often a grant held back for the leader's word looks again:
// reading the wire's clock costs a mutex, and the word comes a proof gap
// (30 % of the session timeout) after the stall at the earliest.
const livePoll = 5 * time.Millisecond

// errNoWord gives up a grant that waited a whole session timeout for the
// leader's word: the caller queues again at the back.
var errNoWord = errors.New("zklock: no word from ZooKeeper's leader for a session timeout since the grant")

// awaitLive returns nil once a lease on q would be live, or why the grant
// must be given up.
func (q *queueNode) awaitLive(ctx context.Context) error {
	c := q.c
	var poll *time.Ticker
	var bound <-chan time.Time
	for {
		err := q.lossCheck()
		switch {
		case err == nil && q.trustLeft():
			if poll != nil { // it waited: the node may have been deleted meanwhile
				return q.stillThere(ctx)
			}
			return nil
		case c.isClosed():
			return ErrClosed
		case q.sess.ended() || c.conn.SessionID() != q.sess.id:
			return errSessionOver // the node went with its session
		}
		if poll == nil {
			poll = time.NewTicker(livePoll)
			defer poll.Stop()
			t := time.NewTimer(c.clock.granted())
			defer t.Stop()
			bound = t.C
		}
		select {
		case <-poll.C:
		case <-bound:
			return errNoWord
		case <-q.sess.lost:
		case <-c.closing:
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("%w: the lock was granted, but ZooKeeper's leader has not confirmed the session since: %w",
				ErrUnreachable, ctxCause(ctx))
		}
	}
}

// grantMargin is the part of the granted session timeout a new lease must
// have left before it would be presumed lost: a lease whose deadline is a
// millisecond away is handed out dead all the same.
const grantMargin = 20

// trustLeft reports that a lease on q would stay trusted for a twentieth of
// the session timeout at least (a waiter's word is 35-50 % of T fresh in
// steady state, and 50 % just after the stall it waited out).
func (q *queueNode) trustLeft() bool {
	c := q.c
	return c.wire == nil || c.clock.untilLossDeadlineOf(q.sess.id) >= c.clock.granted()/grantMargin
}

// stillThere reads q's node: nil if it exists, errNodeDeleted if someone
// deleted it (the caller queues again), or the failure.
func (q *queueNode) stillThere(ctx context.Context) error {
	c := q.c
	ok, err := call(ctx, c, func() (bool, error) {
		ok, _, err := c.conn.Exists(q.full())
		return ok, err
	})
	switch {
	case err != nil:
		return err
	case !ok:
		return errNodeDeleted
	}
	return nil
}
