package zklock

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// This file holds the wait for a queue node's turn.

// Outcomes of one step of the wait that are not the caller's business.
var (
	errLookAgain = errors.New("zklock: look again") // the node ahead changed: list again
	errRetry     = errors.New("zklock: retry")      // the connection dropped: back off, then list again
)

// waitTurn waits until rule says q holds the lock. It watches only the one
// node rule names (no herd: one release wakes one waiter) and re-checks
// after every wake-up, because that node may have left without ever holding
// the lock (a waiter that gave up). children is a listing made after q was
// created, or nil.
//
// With try set it never waits: ErrLocked if q does not hold at once.
// errSessionOver or errNodeDeleted: q is gone.
func (c *Client) waitTurn(ctx context.Context, q *queueNode, rule turnRule, children []string, try bool) error {
	r := c.retrier(ctx, q.sess)
	for {
		var err error
		if children == nil {
			children, err = c.list(ctx, q)
		}
		if err == nil {
			t := readTurn(rule, children, q.name)
			children = nil
			switch {
			case !t.present:
				return c.goneReason(q)
			case t.holds:
				return nil // the listing was made after q existed
			case try:
				return ErrLocked
			}
			err = c.waitPred(ctx, q, q.path+"/"+t.blocker, t.last)
		}
		switch {
		case errors.Is(err, errLookAgain):
		case errors.Is(err, errRetry):
			if err := r.wait(); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// list lists q's lock path.
func (c *Client) list(ctx context.Context, q *queueNode) ([]string, error) {
	children, err := call(ctx, c, func() ([]string, error) {
		ch, _, err := c.conn.Children(q.path)
		return ch, err
	})
	switch kind := classify(err); {
	case kind == errNone, kind == errStop:
		return children, err
	case errors.Is(err, zk.ErrNoNode):
		return nil, c.goneReason(q) // the lock path is gone, so is q
	case kind == errConnection:
		return nil, errRetry
	case kind == errSession:
		return nil, errSessionOver
	}
	return nil, fmt.Errorf("zklock: list %s: %w", q.path, err)
}

// waitPred watches pred, the node q waits for, until it changes. It returns
// nil when the lock is q's: pred was the last thing between q and the lock,
// it is gone, and q's node still exists (confirmHead). A watch set with GetW, not ExistsW: on a
// node that just vanished ExistsW leaves a watch for its re-creation behind
// on the server; GetW leaves nothing. A waiter that gives up leaves its watch
// on pred until pred changes or the session ends (go-zookeeper cannot remove
// watches); the server keeps at most one watch per session and node.
func (c *Client) waitPred(ctx context.Context, q *queueNode, pred string, last bool) error {
	ch, err := call(ctx, c, func() (<-chan zk.Event, error) {
		_, _, ch, err := c.conn.GetW(pred)
		return ch, err
	})
	switch kind := classify(err); {
	case kind == errNone:
	case errors.Is(err, zk.ErrNoNode):
		if last {
			return c.confirmHead(ctx, q)
		}
		return errLookAgain
	case kind == errStop:
		return err
	case kind == errConnection:
		return errRetry
	case kind == errSession:
		return errSessionOver
	default:
		return fmt.Errorf("zklock: watch %s: %w", pred, err)
	}
	select {
	case ev := <-ch:
		switch {
		case ev.Type == zk.EventNodeDeleted && last:
			return c.confirmHead(ctx, q)
		case ev.Type == zk.EventNotWatching && classify(ev.Err) == errSession:
			return errSessionOver
		}
		return errLookAgain // a waiter ahead left, or data changed: look again
	case <-q.sess.lost:
		return errSessionOver
	case <-ctx.Done():
		return ctxErr(ctx)
	case <-c.closing:
		return ErrClosed
	case <-c.connEnded:
		return errConnEnded
	}
}

// confirmHead proves, after the holder ahead left, that q's node still exists
// in its session: only then is the lock ours. (If someone deleted it, the
// waiter behind it may also be watching that holder.) The read is the own-node
// read of the lease, so it costs nothing extra when the own-node watch is on.
func (c *Client) confirmHead(ctx context.Context, q *queueNode) error {
	r := c.retrier(ctx, q.sess)
	for {
		res, err := call(ctx, c, q.readOwn)
		switch kind := classify(err); {
		case kind == errNone && res.owner == q.sess.id:
			q.finishFetch(res, nil)
			return nil
		case kind == errNone, kind == errSession:
			return errSessionOver
		case errors.Is(err, zk.ErrNoNode):
			return c.goneReason(q)
		case kind != errConnection:
			return fmt.Errorf("zklock: read %s: %w", q.full(), err)
		}
		if err := r.wait(); err != nil {
			return err
		}
	}
}

// goneReason says why q's node is missing: its session ended, or someone
// deleted it while the session lived on.
func (c *Client) goneReason(q *queueNode) error {
	if q.sess.ended() || c.conn.SessionID() != q.sess.id {
		return errSessionOver
	}
	return errNodeDeleted
}
