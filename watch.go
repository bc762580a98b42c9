package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock/internal/lockpath"
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
func (q *queueNode) waitTurn(ctx context.Context, rule lockpath.Rule, w watcher, children []string, try bool) error {
	c := q.c
	r := c.retrier(ctx, q.sess)
	var before lockpath.Seen      // the nodes ahead at the last listing
	joined := false               // a node joined ahead since a listing: list before holding
	fromCreate := children != nil // the first pass reads the listing made behind the create
	for {
		first := fromCreate
		fromCreate = false
		var err error
		if children == nil {
			children, err = w.list(ctx, q)
		}
		var nodes []lockpath.Node
		if err == nil {
			nodes, err = q.readListing(children)
		}
		if err == nil {
			t := lockpath.TurnIn(rule, nodes, q.name)
			children = nil
			joined = joined || (before != nil && before.JoinedAhead(t.Ahead))
			before, t.Last = lockpath.SeenOf(t.Ahead), t.Last && !joined
			t.Ahead = nil // the wait keeps no listing alive
			switch {
			case !t.Present:
				return q.goneReason()
			case t.Holds:
				q.heldAtOnce = first
				return nil // the listing was made after q existed
			case try:
				return ErrLocked
			}
			err = w.wait(ctx, q, t) // nil only when the lock is q's
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

// A watcher is how a waiter learns that its turn may have come. The rules
// of the mutex family watch the one node that blocks them (nodeWatcher); a
// semaphore's turnstile holder watches the list of leases (listWatcher).
type watcher interface {
	// list lists q's path.
	list(ctx context.Context, q *queueNode) ([]string, error)
	// wait returns once something that may change t happened
	// (errLookAgain), or nil when it proves the lock is q's.
	wait(ctx context.Context, q *queueNode, t lockpath.Turn) error
}

// nodeWatcher watches the one node a waiter waits for.
type nodeWatcher struct{ c *Client }

func (w nodeWatcher) list(ctx context.Context, q *queueNode) ([]string, error) {
	children, err := call(ctx, w.c, func() ([]string, error) {
		ch, _, err := w.c.conn.Children(q.path)
		return ch, err
	})
	return children, q.listError(err)
}

func (w nodeWatcher) wait(ctx context.Context, q *queueNode, t lockpath.Turn) error {
	return q.waitPred(ctx, q.path+"/"+t.Blocker, t.Last)
}

// listWatcher lists with a child watch and waits for it to fire: any lease
// that leaves may free a slot. Only one waiter (the turnstile's holder)
// watches, so a release still wakes one waiter.
type listWatcher struct {
	c       *Client
	changed <-chan zk.Event // the watch of the last listing, if it set one
}

func (w *listWatcher) list(ctx context.Context, q *queueNode) ([]string, error) {
	type listing struct {
		children []string
		ch       <-chan zk.Event
	}
	l, err := call(ctx, w.c, func() (listing, error) {
		children, _, ch, err := w.c.conn.ChildrenW(q.path)
		return listing{children, ch}, err
	})
	w.changed = l.ch
	return l.children, q.listError(err)
}

func (w *listWatcher) wait(ctx context.Context, q *queueNode, _ lockpath.Turn) error {
	ch := w.changed
	w.changed = nil
	if ch == nil {
		return errLookAgain // the listing came without a watch (the one behind the create): list again
	}
	if _, err := q.nextEvent(ctx, ch, nil); err != nil {
		return err
	}
	return errLookAgain
}

// listError says what a failed listing of q's path means for the wait.
func (q *queueNode) listError(err error) error {
	switch kind := classify(err); {
	case kind == errNone, kind == errStop:
		return err
	case errors.Is(err, zk.ErrNoNode):
		return q.goneReason() // the lock path is gone, so is q
	case kind == errConnection:
		return errRetry
	case kind == errSession:
		return errSessionOver
	}
	return fmt.Errorf("zklock: list %s: %w", q.path, err)
}

// waitPred watches pred, the node q waits for, until it changes. It returns
// nil when the lock is q's: pred was the last thing between q and the lock,
// it is gone, and q's node still existed when it went. A watch set with GetW,
// not ExistsW: on a node that just vanished ExistsW leaves a watch for its
// re-creation behind on the server; GetW leaves nothing. A waiter that gives
// up leaves its watch on pred until pred changes or the session ends
// (go-zookeeper cannot remove watches); the server keeps at most one watch
// per session and node.
//
// The first wait also reads q's own node, setting the own-node watch the
// lease needs anyway, in the same flight as pred's watch. Then, when pred
// goes, the order of the connection's events proves that q's node was still
// there (ownWatchProves) and the lock is q's without another round trip;
// where the order proves nothing, confirmHead reads the node.
func (q *queueNode) waitPred(ctx context.Context, pred string, last bool) error {
	c := q.c
	own := q.sendOwnRead()
	type watched struct {
		data []byte
		stat *zk.Stat
		ch   <-chan zk.Event
	}
	got, err := call(ctx, c, func() (watched, error) {
		data, stat, ch, err := c.conn.GetW(pred)
		return watched{data, stat, ch}, err
	})
	if oerr := q.takeOwnRead(ctx, own); oerr != nil {
		return oerr
	}
	switch kind := classify(err); {
	case kind == errNone:
	case errors.Is(err, zk.ErrNoNode):
		if last {
			return q.holdIfProven(ctx)
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
	q.waitingFor(got.data)
	wake, stop := q.watchOverdue(ctx, pred, last, got.data, got.stat)
	defer stop()
	ev, err := q.nextEvent(ctx, got.ch, wake)
	switch {
	case err != nil:
		return err
	case ev.Type == zk.EventNodeDeleted && last:
		return q.holdIfProven(ctx)
	}
	return errLookAgain // a waiter ahead left, or data changed: look again
}

// sendOwnRead sends the read of q's own node that sets its own-node watch,
// on a waiter's first wait, where the wire can tell connections apart; nil
// when it is not made here (the lease reads the node after the grant).
func (q *queueNode) sendOwnRead() <-chan result[ownRead] {
	c := q.c
	if c.wire == nil || !c.opts.watchOwnNode || q.brief || isDone(q.fetched) || q.ownEpoch != 0 {
		return nil
	}
	q.ownEpoch = c.wire.ConnEpoch() // before the read leaves
	return goCall(c, q.readOwn)
}

// takeOwnRead waits for the own-node read sent with pred's watch and records
// it as the lease's own read (fencing token and own-node watch).
func (q *queueNode) takeOwnRead(ctx context.Context, own <-chan result[ownRead]) error {
	c := q.c
	if own == nil {
		return nil
	}
	res, err := await(ctx, c, own)
	err = q.ownReadError(res, err)
	if errors.Is(err, errRetry) {
		q.ownEpoch = 0 // read again on the next wait
	}
	return err
}

// ownReadError says what one read of q's own node means for the wait: nil
// when the node is q's, in its session (recorded as the lease's own read),
// errRetry after a dropped connection, else why q cannot hold.
func (q *queueNode) ownReadError(res ownRead, err error) error {
	switch kind := classify(err); {
	case kind == errNone && res.owner == q.sess.id:
		q.finishFetch(res, nil)
		return nil
	case kind == errNone, kind == errSession:
		return errSessionOver
	case errors.Is(err, zk.ErrNoNode):
		return q.goneReason()
	case kind == errStop:
		return err
	case kind == errConnection:
		return errRetry
	}
	return fmt.Errorf("zklock: read %s: %w", q.full(), err)
}

// holdIfProven grants q the lock once pred, the last node ahead, is gone,
// if q's node provably still existed then; otherwise it reads the node.
func (q *queueNode) holdIfProven(ctx context.Context) error {
	c := q.c
	if q.ownWatchProves() {
		q.proof = handOffProof{read: q.ownEpoch, grant: c.wire.ConnEpoch()}
		return nil
	}
	return q.confirmHead(ctx)
}

// ownWatchProves reports that q's node existed when the node ahead of it
// went, from the order of events alone. The own-node read succeeded, so the
// node existed when the read was served, and it was watched from then on.
// go-zookeeper hands a connection's replies and watch events over one at a
// time, in the server's order, and puts each event in its watch's buffered
// channel before it reads the next frame. So when the deletion of the node
// ahead (or the reply saying it is gone) has been received, a deletion of
// q's node served earlier is already in q's channel. An empty channel, with
// no reconnect since the read was sent, means: q's node was deleted after
// the node ahead, or not at all; either way it was there when the node
// ahead went, and a node once gone never comes back (its name carries a
// GUID), so q is first. Any event at all in the channel (a deletion, a data
// change, the end of the watch) or a new connection proves nothing.
func (q *queueNode) ownWatchProves() bool {
	c := q.c
	return q.ownEpoch != 0 && isDone(q.fetched) && q.fetchErr == nil && q.ownEv != nil &&
		len(q.ownEv) == 0 && c.wire.ConnEpoch() == q.ownEpoch
}

// nextEvent waits for a watch of q's to fire, or says why the wait ends
// first.
func (q *queueNode) nextEvent(ctx context.Context, ch <-chan zk.Event, wake <-chan time.Time) (zk.Event, error) {
	c := q.c
	select {
	case <-wake:
		return zk.Event{}, errLookAgain
	case ev := <-ch:
		if ev.Type == zk.EventNotWatching && classify(ev.Err) == errSession {
			return ev, errSessionOver
		}
		return ev, nil
	case <-q.sess.lost:
		return zk.Event{}, errSessionOver
	case <-ctx.Done():
		return zk.Event{}, c.ctxErr(ctx)
	case <-c.closing:
		return zk.Event{}, ErrClosed
	case <-c.session.ended:
		return zk.Event{}, errConnEnded
	}
}

// confirmHead proves, after the holder ahead left, that q's node still exists
// in its session: only then is the lock ours. (If someone deleted it, the
// waiter behind it may also be watching that holder.) It is needed only where
// the order of events proves nothing (see ownWatchProves): after a reconnect,
// after an event on the own node, or without the wire; where the lease's
// own-node read was not made yet, this read is it.
func (q *queueNode) confirmHead(ctx context.Context) error {
	c := q.c
	r := c.retrier(ctx, q.sess)
	for {
		epoch := c.wire.ConnEpoch()
		res, err := call(ctx, c, q.readOwn)
		if err := q.ownReadError(res, err); !errors.Is(err, errRetry) {
			q.proof = handOffProof{read: epoch, grant: c.wire.ConnEpoch(), after: true}
			return err
		}
		if err := r.wait(); err != nil {
			return err
		}
	}
}

// goneReason says why q's node is missing: its session ended, or someone
// deleted it while the session lived on.
func (q *queueNode) goneReason() error {
	c := q.c
	if q.sess.ended() || c.conn.SessionID() != q.sess.id {
		return errSessionOver
	}
	return errNodeDeleted
}

// waitingFor tells q's trace whom q waits for, from that node's data.
func (q *queueNode) waitingFor(data []byte) {
	if q.trace == nil {
		return
	}
	if o, ok := parseOwner(data); ok && o.Trace != "" && o.Trace != q.waitedFor {
		q.waitedFor = o.Trace
		q.trace.WaitingFor(o.Trace)
	}
}
