package zklock

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// waitTurn waits until q is first in its lock path's queue. It watches only
// the node just ahead (no herd: one release wakes one waiter) and re-checks
// after every wake-up, because the node ahead may have left without ever
// holding the lock (a waiter that gave up). children is a listing made after
// q was created, or nil.
//
// With try set it never waits: ErrLocked if anyone is ahead.
// errRequeue: q is gone (its session expired, or someone deleted it).
func (c *Client) waitTurn(ctx context.Context, q *queueNode, children []string, try bool) error {
	for {
		if children == nil {
			var err error
			children, err = await(ctx, c, goCall(c, func() ([]string, error) {
				ch, _, err := c.conn.Children(q.path)
				return ch, err
			}))
			switch {
			case err == nil:
			case retryable(err):
				continue
			case errors.Is(err, zk.ErrNoNode), sessionGone(err):
				return errRequeue
			default:
				return fmt.Errorf("zklock: list %s: %w", q.path, err)
			}
		}
		nodes := sortedLockNodes(children)
		children = nil
		me := -1
		for i, n := range nodes {
			if n.name == q.name {
				me = i
				break
			}
		}
		switch {
		case me < 0:
			return errRequeue
		case me == 0:
			return q.stillOurs()
		case try:
			return ErrLocked
		}
		// Sequence numbers only grow, so nobody can join ahead of us: once
		// the node ahead is the holder and it goes, the lock is ours without
		// another listing.
		predIsHolder := me == 1
		pred := q.path + "/" + nodes[me-1].name
		type watched struct {
			ch <-chan zk.Event
		}
		// GetW, not ExistsW: on a node that just vanished ExistsW leaves a
		// watch for its re-creation behind on the server; GetW leaves nothing.
		w, err := await(ctx, c, goCall(c, func() (watched, error) {
			_, _, ch, err := c.conn.GetW(pred)
			return watched{ch}, err
		}))
		switch {
		case err == nil:
		case errors.Is(err, zk.ErrNoNode):
			if predIsHolder {
				return q.stillOurs()
			}
			continue
		case retryable(err):
			continue
		case sessionGone(err):
			return errRequeue
		case errors.Is(err, ErrClosed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return err
		default:
			return fmt.Errorf("zklock: watch %s: %w", pred, err)
		}
		select {
		case ev := <-w.ch:
			if ev.Type == zk.EventNodeDeleted && predIsHolder {
				return q.stillOurs()
			}
			// Any other wake-up (a waiter ahead left, data changed, the watch
			// was dropped with the session): look again.
		case <-q.sess.lost:
			return errRequeue
		case <-ctx.Done():
			return ctxErr(ctx)
		case <-c.closing:
			return ErrClosed
		}
	}
}

// stillOurs confirms, before q is declared first, that its session is the
// connection's live session. A request queued while the connection was down
// goes out on whatever session go-zookeeper has next; if ours expired in the
// meantime, our node went with it, and an answer on the new session about
// the node ahead says nothing about us.
func (q *queueNode) stillOurs() error {
	if q.sess.ended() || q.c.conn.SessionID() != q.sess.id {
		return errRequeue
	}
	return nil
}
