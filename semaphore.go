package zklock

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock/internal/lockpath"
)

// Semaphore lets at most N holders hold leases on one path at once, served
// first come, first served.
//
// The layout is Curator's InterProcessSemaphoreV2: a mutex queue under
// path/locks and the leases under path/leases. A contender takes the mutex,
// creates its lease node, and holds while its lease is among the first N by
// sequence; only the mutex holder waits for a slot (with one child watch on
// path/leases), so a release wakes one waiter and the queue stays in order.
// The limit itself is the rule's input, not a count of the mutex's doing: at
// most N leases are ever among the first N, whatever the mutex does.
//
// The limit is stored as the data of path ("3"): a Semaphore whose N differs
// from the stored one gets ErrLimitMismatch instead of silently allowing
// more. Curator's InterProcessSemaphoreV2 on the same path interoperates (it
// neither stores nor checks the limit: it must be given the same N); kazoo's
// Semaphore has another layout and does not.
type Semaphore struct {
	c     *Client
	path  string
	n     int
	inner *Mutex // the turnstile
}

// ErrLimitMismatch reports a semaphore path whose stored limit differs from
// the caller's N.
var ErrLimitMismatch = errors.New("zklock: semaphore limit differs from the one stored with the path")

// NewSemaphore returns a Semaphore of n permits on path. It checks its
// arguments and does no I/O.
func (c *Client) NewSemaphore(path string, n int) (*Semaphore, error) {
	if err := validatePath(path); err != nil {
		return nil, err
	}
	if n < 1 || n > 1<<20 {
		return nil, fmt.Errorf("%w: semaphore limit %d on %s (must be 1..1048576)", ErrInvalidArgument, n, path)
	}
	inner, err := c.NewMutex(path + "/" + lockpath.Turnstile)
	if err != nil {
		return nil, err
	}
	return &Semaphore{c: c, path: path, n: n, inner: inner}, nil
}

// Path returns the semaphore's path; Limit its N.
func (s *Semaphore) Path() string { return s.path }
func (s *Semaphore) Limit() int   { return s.n }

// Acquire blocks until the caller holds one of the N leases, as
// Mutex.Acquire does: a ctx deadline is the timeout, and a failed or
// cancelled call leaves nothing behind.
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	return opError("acquire", s.path)(s.acquire(ctx, 1, false))
}

// TryAcquire takes a lease only if one is free and nobody waits ahead;
// otherwise it returns ErrLocked and leaves nothing behind. Like
// Mutex.TryAcquire, it waits for ZooKeeper at most ctx or the session timeout.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) {
	return opError("try-acquire", s.path)(s.acquire(ctx, 1, true))
}

// AcquireN blocks until the caller holds k of the N permits at once (1 ≤ k
// ≤ N), all or none, served in arrival order like Acquire: a request for k
// waits only for the holders and waiters ahead of it, and one for fewer
// permits that arrives later queues behind it, so it never starves. It
// never holds part of the k while it waits: its first lease holds only when
// there is room for all k behind it, and the others (made while it still
// holds the turnstile, so no one comes in between) then hold at once.
//
// The lease is made of k lease nodes, one per permit, so Curator's
// InterProcessSemaphoreV2 on the path counts them all: Parts gives them,
// Release frees them all, Done closes when any ends, Token is the highest.
// A ctx deadline is the timeout; a failed or cancelled call leaves nothing
// behind (its one waiting lease is removed, as Acquire's; what was taken is
// released). k of 1 gives the lease Acquire gives.
func (s *Semaphore) AcquireN(ctx context.Context, k int) (*Lease, error) {
	return opError("acquire", s.path)(s.acquire(ctx, k, false))
}

// TryAcquireN takes k permits only if k are free and nobody waits ahead;
// otherwise it returns ErrLocked and holds nothing. Like TryAcquire, it waits
// for ZooKeeper at most ctx or the session timeout.
func (s *Semaphore) TryAcquireN(ctx context.Context, k int) (*Lease, error) {
	return opError("try-acquire", s.path)(s.acquire(ctx, k, true))
}

// Free returns how many of the N permits no lease takes: N minus the leases
// on the path, held or waiting (a request for several permits that waits
// counts as one until it holds), never below 0. It is one listing, a
// snapshot that may be stale when it returns; it waits for ZooKeeper at most
// ctx or the session timeout.
func (s *Semaphore) Free(ctx context.Context) (int, error) {
	c := s.c
	ctx, scope, err := c.begin(ctx, true)
	if err != nil {
		return 0, err
	}
	defer scope.end()
	children, err := call(ctx, c, func() ([]string, error) {
		ch, _, err := c.conn.Children(s.leasesPath())
		return ch, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return s.n, nil // no lease was ever taken here, or the cleaner removed the path
	case err != nil:
		return 0, fmt.Errorf("zklock: free permits of %s: %w", s.path, err)
	}
	return max(0, s.n-lockpath.Count(children)), nil
}

// Holders lists the leases held or pending, in order; the first N hold.
func (s *Semaphore) Holders(ctx context.Context) ([]Contender, error) {
	cs, err := s.c.Contenders(ctx, s.leasesPath())
	for i := range cs {
		cs[i].Holder = i < s.n
	}
	return cs, err
}

func (s *Semaphore) leasesPath() string { return s.path + "/" + lockpath.Leases }

func (s *Semaphore) acquire(ctx context.Context, k int, try bool) (*Lease, error) {
	if k < 1 || k > s.n {
		return nil, fmt.Errorf("%w: %d permits of a semaphore of %d on %s (must be 1..%d)", ErrInvalidArgument, k, s.n, s.path, s.n)
	}
	if try {
		var cancel context.CancelFunc
		ctx, cancel = s.c.answerBound(ctx)
		defer cancel()
	}
	start := time.Now()
	l, err := s.acquireOrdered(ctx, k, try)
	s.c.opts.metrics.Acquired(KindSemaphore, time.Since(start), err) // the whole call, turnstile included
	return l, err
}

// errPermitsSplit: a later permit of an AcquireN could not hold at once
// (someone came in between after the turnstile was lost); all were given
// back, to be taken again through the turnstile.
var errPermitsSplit = errors.New("zklock: permits split")

// acquireOrdered takes the turnstile, then k leases (takePermits), and lets
// the turnstile go. A lease may only be queued by the turnstile's holder: one queued
// without it (after an expiry, say) would land behind leases created later,
// and a Curator peer, which counts leases instead of placing them, would
// then wait for ever beside it. So when the lease's node goes while it
// waits, everything is taken again from the turnstile (or the loss is
// reported, WithRequeueOnExpiry(false)).
//
// The turnstile's own end does not end the lease's wait: a lease already
// queued keeps its place whatever becomes of the turnstile (a stall that
// presumes the turnstile lost while the session survives, or someone
// deleting it), and the slot rule alone decides who holds.
func (s *Semaphore) acquireOrdered(ctx context.Context, k int, try bool) (*Lease, error) {
	for {
		ta := s.c.exclusive(ctx, s.inner.path, try)
		ta.policy = policyTurnstile
		turnstile, err := s.c.acquire(ctx, ta)
		if err != nil {
			return nil, err
		}
		// The limit is checked by the turnstile's holder: a cleaner may
		// delete an unused semaphore path, limit included, and the next
		// holder stores it again; no client with another N can slip in
		// between its check and its lease.
		if err := s.checkLimit(ctx); err != nil {
			return nil, errors.Join(err, s.leaveTurnstile(ctx, turnstile))
		}
		l, err := s.takePermits(ctx, k, try)
		if terr := s.leaveTurnstile(ctx, turnstile); terr != nil {
			if l != nil {
				err = releaseAll(ctx, s.c, []*Lease{l})
			}
			return nil, errors.Join(terr, err)
		}
		gone := errors.Is(err, ErrSessionExpired) || errors.Is(err, ErrQueueNodeDeleted)
		switch {
		case err == nil:
			return l, nil // granted: among the first N
		case errors.Is(err, errPermitsSplit) && ctx.Err() == nil:
			continue // the permits given back: through the turnstile again
		case !gone, !s.c.opts.requeue:
			return nil, err
		case ctx.Err() != nil:
			return nil, s.c.ctxErr(ctx)
		}
		s.c.log.Info("zklock: semaphore lease gone while waiting; taking the turnstile again", "path", s.path)
	}
}

// takePermits queues k leases, one after another, while the caller holds
// the turnstile. The first waits until it is among the first N-k+1, that is
// until there is room for all k; the one after it must be among the first
// N-k+2, and so on, so each of the others holds as soon as it is made: no
// one else makes a lease while the turnstile is held. Each rule lets a
// lease hold only among the first N, so the count is kept even if the
// turnstile is lost meanwhile and someone comes in between (the lease then
// waits its turn). Each lease is the engine's (a lost reply, a timeout or a
// cancel leaves no node); on any failure the ones taken are released, and
// one that ended meanwhile (its session, a deletion) sends the caller back
// through the turnstile as a lost waiting lease does.
func (s *Semaphore) takePermits(ctx context.Context, k int, try bool) (*Lease, error) {
	parts := make([]*Lease, 0, k)
	for i := range k {
		// Only the first permit waits. Once it holds there is room for all
		// k, so the others hold at once unless someone came in between
		// (the turnstile lost meanwhile): waiting then could close a cycle
		// with that other caller's first permit, so all are given back and
		// taken again through the turnstile.
		a := s.c.exclusive(ctx, s.leasesPath(), try || i > 0)
		a.style, a.rule, a.policy = lockpath.SemaphoreLease, lockpath.SlotsTurn(s.n-k+1+i), policySlot
		l, err := s.c.acquire(ctx, a)
		if i > 0 && !try && errors.Is(err, ErrLocked) {
			err = fmt.Errorf("%w (%s): another caller came in between the permits", errPermitsSplit, s.path)
		}
		if err != nil {
			return nil, errors.Join(err, releaseAll(ctx, s.c, parts))
		}
		parts = append(parts, l)
	}
	if k == 1 {
		return parts[0], nil
	}
	for _, p := range parts {
		if err := p.Err(); err != nil {
			gone := ErrSessionExpired
			if isNodeDeleted(err) {
				gone = ErrQueueNodeDeleted
			}
			rerr := releaseAll(ctx, s.c, parts)
			return nil, errors.Join(fmt.Errorf("%w (%s): a permit's lease ended while the others were taken: %w", gone, s.path, err), rerr)
		}
	}
	return newMultiLease(s.c, parts), nil
}

// leaveTurnstile releases the turnstile. Only a refused delete matters: the
// node then stays until the session ends and keeps every other client out,
// so the caller hears of it, with the node named. A turnstile lost
// meanwhile is gone already.
func (s *Semaphore) leaveTurnstile(ctx context.Context, turnstile *Lease) error {
	err := releaseAll(ctx, s.c, []*Lease{turnstile})
	if err == nil || errors.Is(err, ErrLockLost) {
		return nil
	}
	return fmt.Errorf("zklock: semaphore %s: turnstile node %s stays until the session ends (its delete was refused): %w", s.path, turnstile.Node(), err)
}

// checkLimit makes sure path stores this semaphore's limit: it creates path
// with it, fills it in where path has no data, and refuses a different one.
func (s *Semaphore) checkLimit(ctx context.Context) error {
	c, want := s.c, strconv.Itoa(s.n)
	if !c.track() {
		return ErrClosed
	}
	defer c.wg.Done()
	r := c.retrier(ctx, nil)
	for {
		err := s.tryLimit(ctx, want)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrLimitMismatch), errors.Is(err, ErrIncompatible), classify(err) == errStop:
			return err
		case errors.Is(err, zk.ErrNoNode) && path.Dir(s.path) != "/":
			if err := c.parents.ensure(ctx, path.Dir(s.path)); err != nil {
				c.cleaner.schedule(path.Dir(s.path)) // the ancestors it did create
				return err
			}
			continue
		case classify(err) == errRefused && !errors.Is(err, zk.ErrNodeExists) && !errors.Is(err, zk.ErrBadVersion) && !errors.Is(err, zk.ErrNoNode):
			return fmt.Errorf("zklock: semaphore limit on %s: %w", s.path, err)
		}
		if err := r.wait(); err != nil { // a race with another client, or a dropped connection
			return err
		}
	}
}

// tryLimit makes one attempt of checkLimit.
func (s *Semaphore) tryLimit(ctx context.Context, want string) error {
	c := s.c
	type node struct {
		data []byte
		stat *zk.Stat
	}
	read := goCall(c, func() (node, error) {
		data, stat, err := c.conn.Get(s.path)
		return node{data, stat}, err
	})
	// Pipelined with the read: what else lives on the path (kazoo's
	// Semaphore keeps its leases there, and would not count ours).
	listed := goCall(c, func() ([]string, error) {
		children, _, err := c.conn.Children(s.path)
		return children, err
	})
	got, err := await(ctx, c, read)
	if children, lerr := await(ctx, c, listed); err == nil && lerr == nil {
		if ierr := checkLayout(s.path, children); ierr != nil {
			return ierr
		}
	}
	switch {
	case errors.Is(err, zk.ErrNoNode):
		_, err = call(ctx, c, func() (string, error) { return c.conn.Create(s.path, []byte(want), 0, c.opts.acl) })
		return err
	case err != nil:
		return err
	case string(got.data) == want:
		return nil
	case len(got.data) == 0:
		_, err = call(ctx, c, func() (*zk.Stat, error) { return c.conn.Set(s.path, []byte(want), got.stat.Version) })
		return err
	}
	return fmt.Errorf("%w: %s stores %q, this client asks for %s", ErrLimitMismatch, s.path, got.data, want)
}
