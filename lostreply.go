package zklock

// This file holds the recovery of a create whose reply was lost: the node
// may exist, and is found by the GUID its name carries.

import (
	"context"
	"errors"
	"strings"

	"github.com/go-zookeeper/zk"
)

// lostReply stands for a create whose reply was lost.
func lostReply() <-chan result[createdNode] {
	ch := make(chan result[createdNode], 1)
	ch <- result[createdNode]{err: zk.ErrConnectionClosed}
	return ch
}

// findByGUID looks in the lock path for a node carrying q's GUID that belongs
// to the live session, after a create whose reply was lost. It returns a zero
// createdNode if there is none. In the background (nobody waiting, possibly
// during Close) it keeps going until it knows or the connection is closed.
func (q *queueNode) findByGUID(ctx context.Context, background bool) (createdNode, error) {
	c := q.c
	r := c.retrier(ctx, nil)
	if background {
		r = c.cleanupRetrier(nil)
	}
	for {
		var found createdNode
		var err error
		if background {
			found, err = q.lookForGUID()
		} else {
			found, err = call(ctx, c, func() (createdNode, error) { return q.lookForGUID() })
		}
		switch kind := classify(err); {
		case kind == errNone:
			return found, nil
		case kind == errSession, errors.Is(err, zk.ErrNoNode):
			return createdNode{}, nil // no node of the live session carries it
		case kind != errConnection:
			return createdNode{}, err
		}
		if err := r.wait(); err != nil {
			if background {
				return createdNode{}, nil // the connection is closed: nothing of the session remains
			}
			return createdNode{}, err
		}
	}
}

// lookForGUID makes one search: it catches the server up with the leader (a
// follower may not have applied the lost create yet), lists the lock path,
// and adopts a node with q's GUID only if it belongs to the live session (a
// node of an expired session may linger a moment).
func (q *queueNode) lookForGUID() (createdNode, error) {
	c := q.c
	if _, err := c.conn.Sync(q.path); err != nil {
		return createdNode{}, err
	}
	children, _, err := c.conn.Children(q.path)
	if err != nil {
		return createdNode{}, err
	}
	for _, name := range children {
		if !strings.Contains(name, q.guid) {
			continue
		}
		sid := c.conn.SessionID()
		ok, stat, err := c.conn.Exists(q.path + "/" + name)
		if err != nil {
			return createdNode{}, err // unknown: look again rather than create a second node
		}
		if ok && stat.EphemeralOwner == sid {
			return createdNode{name: name, session: sid, czxid: stat.Czxid}, nil
		}
	}
	return createdNode{}, nil
}
