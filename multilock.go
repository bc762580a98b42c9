package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// MultiLock takes several lock paths all or nothing, as one Lease. The paths
// are always taken in one canonical order (sorted), so two clients asking
// for overlapping sets, in whatever order they name them, never deadlock:
// each waits only for paths later in the order than all it holds.
//
// If taking a path fails, the paths already taken are released before
// Acquire returns. The Lease's Done closes when any part ends; its Err is the
// first part's loss; Parts gives each part's Lease, whose Token fences the
// resource that path protects.
type MultiLock struct {
	c       *Client
	mutexes []*Mutex // in canonical order
}

// NewMultiLock returns a MultiLock on paths (at least one; duplicates are
// taken once; none may lie inside another: ErrNestedPath). It checks the
// paths and does no I/O.
func (c *Client) NewMultiLock(paths ...string) (*MultiLock, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: a multi-lock needs at least one path", ErrInvalidPath)
	}
	sorted := slices.Clone(paths)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	if err := checkNestedSet(sorted); err != nil {
		return nil, err
	}
	ml := &MultiLock{c: c}
	for _, p := range sorted {
		m, err := c.NewMutex(p)
		if err != nil {
			return nil, err
		}
		ml.mutexes = append(ml.mutexes, m)
	}
	return ml, nil
}

// Paths returns the paths in the order they are taken.
func (ml *MultiLock) Paths() []string {
	out := make([]string, len(ml.mutexes))
	for i, m := range ml.mutexes {
		out[i] = m.path
	}
	return out
}

// Acquire blocks until the caller holds every path. A ctx deadline bounds
// the whole, as for Mutex.Acquire; on any failure nothing stays held or
// queued (what was taken is released in the background when ZooKeeper does
// not answer).
func (ml *MultiLock) Acquire(ctx context.Context) (*Lease, error) {
	return opError("acquire", strings.Join(ml.Paths(), ","))(ml.acquire(ctx, false))
}

// TryAcquire takes every path only if each is free at once; otherwise it
// returns ErrLocked and holds nothing. Like Mutex.TryAcquire, it waits for
// ZooKeeper at most ctx or the session timeout.
func (ml *MultiLock) TryAcquire(ctx context.Context) (*Lease, error) {
	return opError("try-acquire", strings.Join(ml.Paths(), ","))(ml.acquire(ctx, true))
}

func (ml *MultiLock) acquire(ctx context.Context, try bool) (*Lease, error) {
	if try {
		var cancel context.CancelFunc
		ctx, cancel = ml.c.answerBound(ctx)
		defer cancel()
	}
	for {
		l, err := ml.acquireAll(ctx, try)
		switch {
		case errors.Is(err, errYield):
			if err := ml.yielded(ctx); err != nil {
				return nil, err
			}
			continue
		case !errors.Is(err, errPartLost):
			return l, err
		case !ml.c.opts.requeue:
			return nil, err // WithRequeueOnExpiry(false): the loss is the caller's to see
		case ctx.Err() != nil:
			return nil, ml.c.ctxErr(ctx) // no new attempt past the deadline
		}
		// A part was lost (its session expired, say) while the later ones
		// were taken: start again from the first path. Taking the lost one
		// again now, out of order, could deadlock.
		ml.c.log.Info("zklock: a multi-lock part was lost while taking the others; taking them all again", "paths", ml.Paths())
	}
}

// errPartLost ends an attempt of MultiLock.acquire whose part ended before
// the attempt was over.
var errPartLost = errors.New("zklock: a part of the multi-lock was lost while taking the others")

// acquireAll takes every path once, in order. The wait for a path ends as
// soon as a part already taken ends, and a lease is made only of parts that
// all still hold.
func (ml *MultiLock) acquireAll(ctx context.Context, try bool) (*Lease, error) {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	parts := make([]*Lease, 0, len(ml.mutexes))
	fail := func(err error) (*Lease, error) {
		if cause := context.Cause(wctx); (errors.Is(cause, errPartLost) || errors.Is(cause, errYield)) && ctx.Err() == nil {
			err = cause // errPartLost, wrapping why the part ended, or errYield
		}
		rerr := releaseAll(ctx, ml.c, parts)
		if errors.Is(err, errPartLost) || errors.Is(err, errYield) {
			return nil, err // a new attempt, or the loss (requeue off), is what the caller sees
		}
		return nil, errors.Join(err, rerr)
	}
	for _, m := range ml.mutexes {
		stop := watchCycle(ml.c, m.path, parts, func() { cancel(errYield) })
		l, err := ml.c.acquire(wctx, ml.c.exclusive(wctx, m.path, try))
		stop()
		if err != nil {
			return fail(err)
		}
		parts = append(parts, l)
		path := m.path
		l.whenEnded(func(why error) { // runs under the lease's lock: cancel does not block
			cancel(fmt.Errorf("%w: %s: %w", errPartLost, path, why))
		})
	}
	for _, p := range parts {
		if err := p.Err(); err != nil {
			return fail(fmt.Errorf("%w: %s: %w", errPartLost, p.onNode().q.path, err))
		}
	}
	return newMultiLease(ml.c, parts), nil
}

// releaseAll releases parts, all at once, and waits for their deletes up to
// the cleanup timeout past ctx's deadline (or from now, without one): as for
// a waiter that gives up, what was taken is gone when the caller returns,
// unless the connection is down (the deletes then go on in the background),
// and the caller returns within its deadline plus the cleanup timeout. It
// returns the errors that say more than that: a loss, or a refused delete.
func releaseAll(ctx context.Context, c *Client, parts []*Lease) error {
	end := time.Now().Add(c.opts.cleanupTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Add(c.opts.cleanupTimeout).Before(end) {
		end = dl.Add(c.opts.cleanupTimeout)
	}
	if !c.clock.answering() {
		end = time.Now() // nothing to wait for: the deletes go on in the background
	}
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), end)
	defer cancel()
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.Release(rctx)
			if err != nil && !errors.Is(err, ErrNotHeld) && classify(err) != errStop {
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// multiHolding is a MultiLock lease's holding: its parts, each a lease of
// its own. It ends when any part ends.
type multiHolding struct {
	l     *Lease
	parts []*Lease
}

// newMultiLease makes one Lease of parts: it ends when any part ends.
func newMultiLease(c *Client, parts []*Lease) *Lease {
	l := newLeaseState(c)
	l.h = &multiHolding{l: l, parts: parts}
	for _, p := range parts {
		p.whenRevokeRequested(l.revokeRequested)
		p.whenEnded(func(why error) {
			// A loss, Close, or a part released on its own ends the whole;
			// during the lease's own Release, Done closes after the last part.
			if !errors.Is(why, ErrReleased) || !l.releasing() {
				l.closeDone()
			}
		})
	}
	return l
}

// Parts returns the Leases a MultiLock's Lease is made of, one per path in
// canonical order (a Semaphore.AcquireN's: one per permit); a Lease of any
// other primitive is its only part.
func (l *Lease) Parts() []*Lease {
	if m, ok := l.h.(*multiHolding); ok {
		return slices.Clone(m.parts)
	}
	return []*Lease{l}
}

func (m *multiHolding) listen()      {} // each part listens: newMultiLease asks them
func (m *multiHolding) ending(error) {} // the parts count their own ends

// sequence is the first part's.
func (m *multiHolding) sequence() int64 { return m.parts[0].Sequence() }

// deadline is the parts' earliest.
func (m *multiHolding) deadline() time.Time {
	var first time.Time
	for _, p := range m.parts {
		if d := p.Deadline(); first.IsZero() || d.Before(first) {
			first = d
		}
	}
	return first
}

// err is Err for a multi-lease: nil while every part holds, else the
// end of the first part in path order that was not released, else (every
// part released) ErrReleased. A lease released only in part, because the
// delete of a part was refused, is not reported released: it says which
// part still holds.
func (m *multiHolding) err() error {
	var ended error
	var holding []string
	for _, p := range m.parts {
		err := p.Err()
		switch {
		case err == nil:
			holding = append(holding, p.Node())
		case !errors.Is(err, ErrReleased):
			return err
		default:
			ended = err
		}
	}
	if ended != nil && holding != nil {
		return fmt.Errorf("%w as a whole: released in part; %s still held", ErrNotHeld, strings.Join(holding, ","))
	}
	return ended
}

// release releases every part; a part that was lost reports its loss.
// If the server refuses a part's delete, that part stays held and watched,
// Done stays open, and Release returns the refusal and may be called again,
// as for a plain lease. A second Release after a complete one, or a Release
// of a lease that Close ended, returns ErrNotHeld.
func (m *multiHolding) release(ctx context.Context) error {
	if !m.l.claimRelease() {
		return ErrNotHeld
	}
	var errs []error
	released, stillHeld := 0, false
	for i := len(m.parts) - 1; i >= 0; i-- {
		p := m.parts[i]
		switch err := p.Release(ctx); {
		case err == nil:
			released++
		case errors.Is(err, ErrNotHeld): // let go already: on its own, or by Close
		default:
			errs = append(errs, err)
			stillHeld = stillHeld || p.held()
		}
	}
	if stillHeld {
		m.l.unclaimRelease()
		return errors.Join(errs...)
	}
	m.l.closeDone()
	if released == 0 && errs == nil {
		return ErrNotHeld
	}
	return errors.Join(errs...)
}

// token is the highest token of the parts.
func (m *multiHolding) token(ctx context.Context) (int64, error) {
	var top int64
	for _, p := range m.parts {
		t, err := p.Token(ctx)
		if err != nil {
			return 0, err
		}
		top = max(top, t)
	}
	return top, nil
}

// node joins the parts' nodes.
func (m *multiHolding) node() string {
	nodes := make([]string, len(m.parts))
	for i, p := range m.parts {
		nodes[i] = p.Node()
	}
	return strings.Join(nodes, ",")
}
