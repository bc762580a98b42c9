package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock/internal/lockpath"
)

// This file is the acquire engine every primitive runs on. Its contract:
//
//   - A primitive describes what it wants as an ask (the lock path, the
//     owner record, the node style, the turn rule, try or wait, and how the
//     engine treats the node) and calls Client.acquire. It touches no queue
//     node itself.
//   - acquire returns a held *Lease, or an error and nothing left behind: a
//     node it created is removed before it returns (remove.go), or within
//     the cleanup timeout in the background when ZooKeeper does not answer.
//   - The caller's ctx bounds the whole call; with try set the engine never
//     waits for the turn (ErrLocked) and waits for ZooKeeper at most the
//     answer bound.
//   - A node that vanished while waiting (its session expired, or someone
//     deleted it) is queued again at the back, unless WithRequeueOnExpiry
//     is off or the ask says the primitive decides (then ErrSessionExpired
//     or ErrQueueNodeDeleted).
//   - acquire reports Queued and Acquired to Metrics unless the ask says the
//     primitive reports itself or the node is held only briefly.
//
// The steps live where their state does: queue.go makes the node, watch.go
// waits for its turn, remove.go gives it up, lease.go turns it into a Lease.

// ask is what one Acquire asks of the core: a node named in style under
// path, holding when rule says so, treated as policy says. Every primitive
// is an ask.
type ask struct {
	path   string
	owner  Owner
	try    bool // never wait: ErrLocked unless it holds at once
	style  lockpath.Style
	rule   lockpath.Rule
	policy policy
	trace  AcquireSpan // nil unless the client traces (trace.go)
	// watchListing: the listing sent behind the create sets a child watch,
	// which stands in for the own-node watch if the node holds at once
	// (listwatch.go).
	watchListing bool
	// hold, if not nil, makes the lease's holding around its node's (a
	// reentrant hold, reentrant.go).
	hold func(*nodeHolding) holding
}

// policy is how the engine treats an ask's node beyond its turn rule: what
// it waits on, what it reads and reports, and who decides when the node
// vanishes. The zero policy is a lock's; the others are a semaphore's two
// nodes.
type policy uint8

const (
	// policyLock: wait on the one node the rule names, read the token and
	// set the own-node watch, report Queued and Acquired to Metrics, queue
	// again at the back when the node vanishes (WithRequeueOnExpiry).
	policyLock policy = iota
	// policyTurnstile: held only for a moment (a semaphore's turnstile): no
	// token read, no own-node watch, no metrics.
	policyTurnstile
	// policySlot: a semaphore's lease. It waits on the list of the path,
	// reports Queued but leaves Acquired to the primitive, and reports a
	// vanished node instead of queueing again: the primitive decides.
	policySlot
)

// brief: the node is held only for a moment.
func (p policy) brief() bool { return p == policyTurnstile }

// watchesList: wait on the list of the path, not on the node the rule names.
func (p policy) watchesList() bool { return p == policySlot }

// reportsItself: the primitive reports this Acquire to Metrics itself.
func (p policy) reportsItself() bool { return p == policySlot }

// decidesOnLoss: a vanished node is reported, not queued again.
func (p policy) decidesOnLoss() bool { return p == policySlot }

// acquire runs the recipe: queue, wait for the turn, and turn the node into a
// lease; on any failure the node is removed. A node that vanished while
// waiting (session expired, or deleted by someone else) is queued again at
// the back, or reported (WithRequeueOnExpiry).
func (c *Client) acquire(ctx context.Context, a ask) (*Lease, error) {
	ctx, scope, err := c.begin(ctx, a.try)
	if err != nil {
		return nil, err
	}
	defer scope.end()
	defer c.keep.want(false)() // a grant must find the leader's word fresh
	start := time.Now()
	a.startTrace(ctx, c.opts.tracer)
	l, err := c.acquireQueued(ctx, a)
	a.endTrace(l, err)
	if !a.policy.brief() && !a.policy.reportsItself() {
		c.opts.metrics.Acquired(a.style.Kind, time.Since(start), err)
	}
	return l, err
}

// acquireQueued is acquire once tracked.
func (c *Client) acquireQueued(ctx context.Context, a ask) (*Lease, error) {
	for {
		l, err := c.acquireOnce(ctx, a)
		gone := errors.Is(err, errSessionOver) || errors.Is(err, errNodeDeleted)
		switch {
		case errors.Is(err, errNoWord) && !a.policy.decidesOnLoss() && ctx.Err() == nil:
			c.log.Warn("zklock: granted, but no word from ZooKeeper's leader for a session timeout; queueing again at the back", "path", a.path)
			continue
		case errors.Is(err, errNoWord) && ctx.Err() != nil:
			// The gate's bound and ctx ended together (a grant a session
			// timeout before the deadline): ctx's end is the caller's cause.
			return nil, fmt.Errorf("%w: %w: %w", ErrUnreachable, err, context.Cause(ctx))
		case errors.Is(err, errNoWord):
			return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
		case !gone:
			return l, err
		case c.isClosed():
			return nil, ErrClosed
		case !c.opts.requeue, a.policy.decidesOnLoss():
			return nil, goneError(err, a.path)
		case ctx.Err() != nil:
			// The give-up of the node that went may have used the cleanup
			// timeout past the deadline already: a new create would wait
			// for its own outcome as long again.
			return nil, c.ctxErr(ctx)
		}
		c.log.Info("zklock: queue node gone while waiting; queueing again at the back", "path", a.path, "why", err)
	}
}

// acquireOnce queues one node and waits for its turn.
func (c *Client) acquireOnce(ctx context.Context, a ask) (*Lease, error) {
	sess, err := c.session.live(ctx)
	if err != nil {
		return nil, err
	}
	q, children, err := c.enqueue(ctx, a, sess)
	if err != nil {
		return nil, err
	}
	if _, none := c.opts.metrics.(noMetrics); children != nil && (!none || a.trace != nil) && !a.policy.brief() {
		n := lockpath.Count(children) // a parse of the queue: only when someone listens
		c.opts.metrics.Queued(a.style.Kind, n)
		if a.trace != nil {
			a.trace.Queued(n)
		}
	}
	if err := q.wait(ctx, a, children); err != nil {
		return nil, q.giveUp(err)
	}
	if c.opts.watchOwnNode && !a.policy.brief() && !q.useListWatch() {
		q.startFetch() // unless confirmHead read the node already
	}
	if hook, ok := testHookBeforeLease.Load(c); ok {
		hook.(func())() // a pause at the worst moment, in tests
	}
	if err := q.awaitLive(ctx); err != nil {
		return nil, q.giveUp(err)
	}
	l := newLease(q, time.Now(), a.hold)
	if l == nil {
		return nil, q.giveUp(ErrClosed)
	}
	if err := l.Err(); err != nil { // lost in the instant since awaitLive: lose removes the node
		if q.sess.ended() {
			return nil, errSessionOver // queue again, as a wait whose session ended does
		}
		return nil, err
	}
	return l, nil
}

// wait waits for q's turn by a's rule.
func (q *queueNode) wait(ctx context.Context, a ask, children []string) error {
	c := q.c
	var w watcher = nodeWatcher{c}
	if a.policy.watchesList() {
		w = &listWatcher{c: c}
	}
	return q.waitTurn(ctx, a.rule, w, children, a.try)
}

// testHookBeforeLease, set only by tests, runs between a grant of the
// client it is kept for (its key) and the making of the lease: each test's
// client has its own, so such tests run in parallel.
var testHookBeforeLease sync.Map

// giveUp removes q after err ended its wait. If the server refuses the delete
// (an ACL), the error names the node, which stays until its session ends.
func (q *queueNode) giveUp(err error) error {
	if derr := q.abandon(); derr != nil {
		return fmt.Errorf("%w; queue node %s stays until the session ends (its delete was refused: %w)", err, q.full(), derr)
	}
	return err
}

// goneError is what a caller that does not re-queue sees.
func goneError(err error, lockPath string) error {
	if errors.Is(err, errNodeDeleted) {
		return fmt.Errorf("%w (%s)", ErrQueueNodeDeleted, lockPath)
	}
	return fmt.Errorf("%w (%s): %w", ErrSessionExpired, lockPath, zk.ErrSessionExpired)
}

// opError returns a function that wraps a failure of op on path in an
// OpError and passes a lease through, for a call's results:
// opError("acquire", p)(c.acquire(...)).
func opError(op, path string) func(*Lease, error) (*Lease, error) {
	return func(l *Lease, err error) (*Lease, error) {
		if err != nil {
			return l, &OpError{Op: op, Path: path, Err: err}
		}
		return l, nil
	}
}

// startTrace begins a's trace, if the client traces (t), and records its
// context in the node's owner record.
func (a *ask) startTrace(ctx context.Context, t Tracer) {
	if t == nil || a.policy.brief() {
		return
	}
	a.trace = t.StartAcquire(ctx, a.style.Kind, a.path)
	a.owner.Trace = a.trace.Context()
}

// endTrace ends a's trace with the acquisition's outcome.
func (a *ask) endTrace(l *Lease, err error) {
	switch {
	case a.trace == nil:
	case err != nil:
		a.trace.Failed(err)
	default:
		l.traceHold(a.trace.Granted(l.Node(), l.onNode().q.knownToken()))
	}
}
