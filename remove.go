package zklock

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
)

// This file removes a queue node on every path that gives it up: a cancelled
// create, a waiter that stops waiting, a released or lost lease. A delete is
// retried until the node or its session is gone; it never runs on the
// caller's context.

// abandonCreate cleans up after a create whose outcome the caller stopped
// waiting for: once it is known, the node (if any) is removed. While
// ZooKeeper answers, the caller waits a quarter of the cleanup timeout for
// the create's reply (a healthy server sends it within a round trip), then
// for the removal as any give-up does; a create still unanswered by then
// says that ZooKeeper is not answering now, and the caller returns while the
// removal goes on in the background.
func (q *queueNode) abandonCreate(created <-chan result[createdNode]) {
	c := q.c
	var wait time.Duration
	if c.clock.answering() {
		wait = c.opts.cleanupTimeout / 4
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case r := <-created:
		_ = c.waitCleanup(func() error { return q.removeCreated(r) })
	case <-t.C:
		c.inBackground(func() { _ = q.removeCreated(<-created) })
	}
}

// removeCreated removes the node a create made, if it made one: r is the
// create's outcome; a lost reply is looked up by the node's GUID.
func (q *queueNode) removeCreated(r result[createdNode]) error {
	c := q.c
	switch classify(r.err) {
	case errNone:
		q.setNodePath(r.v.name)
	case errConnection:
		found, _ := q.findByGUID(context.Background(), true)
		if found.name == "" {
			return nil
		}
		q.setNodePath(q.path + "/" + found.name)
	default:
		return nil // never created, or gone with the session
	}
	q.sess = c.session.current()
	return q.removeNode()
}

// inBackground runs fn on a goroutine Close waits for; the caller is tracked.
func (c *Client) inBackground(fn func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
}

// abandon removes a queue node the caller gives up. Its error says the server
// refused the delete: the node stays until its session ends.
func (q *queueNode) abandon() error {
	c := q.c
	return c.waitCleanup(func() error { return q.removeNode() })
}

// waitCleanup runs fn in the background and waits for it while ZooKeeper
// can answer, up to the cleanup timeout: on a healthy connection the node is
// gone when the caller returns; without a connection (or past the loss
// deadline) the caller returns at once, and fn goes on (Close waits for it)
// until the node or its session is gone.
func (c *Client) waitCleanup(fn func() error) error {
	done := make(chan error, 1)
	c.wg.Add(1) // callers are tracked, so the count is above zero
	go func() {
		defer c.wg.Done()
		done <- fn()
	}()
	if !c.clock.answering() {
		select {
		case err := <-done:
			return err
		default:
			return nil
		}
	}
	t := time.NewTimer(c.opts.cleanupTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		c.log.Warn("zklock: queue node removal still pending after the cleanup timeout; it goes on in the background")
		return nil
	}
}

// errLeaseEnded ends a Release's wait whose lease ended meanwhile (a loss):
// the loss is the outcome, and the delete goes on in the background.
var errLeaseEnded = errors.New("zklock: lease ended while releasing")

// removeWithin removes q's node, waiting for it until ctx ends or ended is
// closed (errLeaseEnded); the removal goes on in the background after that.
func (q *queueNode) removeWithin(ctx context.Context, ended <-chan struct{}) (removal, error) {
	c := q.c
	type outcome struct {
		how removal
		err error
	}
	done := make(chan outcome, 1)
	if c.trackRelease() {
		go func() {
			defer c.wg.Done()
			how, err := q.deleteNode()
			done <- outcome{how, err}
		}()
	} else {
		how, err := q.deleteNode() // Close has finished releasing: no new goroutines
		done <- outcome{how, err}
	}
	select {
	case o := <-done:
		return o.how, o.err
	case <-ended:
		return removedUnknown, errLeaseEnded
	case <-ctx.Done():
		return removedUnknown, c.ctxErr(ctx)
	}
}

// removeInBackground removes q's node without anyone waiting (a lost
// lease), once wait has passed, or at once when Close begins.
func (q *queueNode) removeInBackground(wait time.Duration) {
	c := q.c
	if !c.trackRelease() {
		return // Close has finished releasing and is closing the session
	}
	go func() {
		defer c.wg.Done()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-c.closing:
				t.Stop()
			}
		}
		_ = q.removeNode()
	}()
}

// removal says how a node went away.
type removal int

const (
	removedUnknown     removal = iota // not known (yet)
	removedByUs                       // our delete succeeded (or found it gone after a delete whose reply was lost)
	removedByOther                    // it was gone at our first delete, with the session alive: someone else deleted it
	removedWithSession                // the session is over, or Close closed it: the server removes the node
)

// removeNode deletes q's node, retrying across disconnections until the node
// or its session is gone. A delete is never sent on behalf of the caller's
// context: a cancelled caller must still not leave a node behind. It fails
// only when the server refuses the delete (an ACL, say), with the server's
// error as it is: callers say what they were doing.
func (q *queueNode) removeNode() error {
	_, err := q.deleteNode()
	return err
}

// deleteNode is removeNode, also saying how the node went.
func (q *queueNode) deleteNode() (removal, error) {
	c := q.c
	if q.removed.Load() {
		return removedByUs, nil
	}
	r := c.cleanupRetrier(q.sess)
	for attempt := 0; ; attempt++ {
		err := c.conn.Delete(q.full(), -1)
		how := removedByUs
		switch kind := classify(err); {
		case errors.Is(err, zk.ErrNoNode) && attempt == 0:
			how = removedByOther
		case kind == errSession:
			how = removedWithSession
		case kind == errConnection:
			if werr := r.wait(); werr != nil {
				q.removed.Store(errors.Is(werr, errSessionOver))
				return removedWithSession, nil
			}
			continue
		case kind != errNone && !errors.Is(err, zk.ErrNoNode):
			c.log.Warn("zklock: deleting queue node failed", "node", q.full(), "err", err)
			return removedUnknown, err
		}
		q.removed.Store(true)
		c.cleaner.schedule(q.path)
		return how, nil
	}
}
