package zklocktest

import (
	"context"
	"fmt"

	"github.com/zklock/zklock"
)

// Client is one process's view of a Server, as a zklock.Client is of
// ZooKeeper: its locks and elections, and Close, which ends them. It is
// safe for concurrent use.
type Client struct {
	s       *Server
	id      int
	closed  bool          // under s.mu
	closing chan struct{} // closed by Close
}

// Close ends everything c holds or waits for: its leases end with
// zklock.ErrClosed (the next waiters hold), its waiting Acquires and
// Campaigns return zklock.ErrClosed, and so does every later call on c. It
// returns nil, and nil again on a closed client.
func (c *Client) Close() error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	close(c.closing)
	waits, leases := s.entriesOf(c)
	for _, e := range waits { // first: none may be granted as the leases go
		e.err = zklock.ErrClosed
		close(e.done)
		s.remove(e)
	}
	for _, e := range leases {
		e.end(zklock.ErrClosed)
		s.remove(e)
	}
	return nil
}

// Contenders lists the contenders queued on path, holder first, as
// zklock's Client.Contenders does: Node, Sequence, Token and Holder (Owner
// and Data are zero). A path nobody queues on has none. As zklock's, it
// refuses an invalid path (zklock.ErrInvalidPath), fails on a closed client
// (zklock.ErrClosed), and returns ctx's error if ctx has ended.
func (c *Client) Contenders(ctx context.Context, path string) ([]zklock.Contender, error) {
	if err := validatePath(path); err != nil {
		return nil, err
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case c.closed:
		return nil, zklock.ErrClosed
	case ctx.Err() != nil:
		return nil, ctxErr(ctx)
	}
	q := s.queues[path]
	if q == nil {
		return nil, nil
	}
	var out []zklock.Contender
	for i, e := range q.entries {
		out = append(out, zklock.Contender{Node: e.node, Sequence: e.seq, Token: e.token, Holder: i == 0})
	}
	return out, nil
}

// Mutex is an exclusive lock on one path of a Server: a zklock.Locker.
type Mutex struct {
	c    *Client
	path string
}

var _ zklock.Locker = (*Mutex)(nil)

// NewMutex returns a Mutex on path. It checks the path as zklock's
// Client.NewMutex does (zklock.ErrInvalidPath).
func (c *Client) NewMutex(path string) (*Mutex, error) {
	if err := validatePath(path); err != nil {
		return nil, err
	}
	return &Mutex{c: c, path: path}, nil
}

// Path returns the lock path.
func (m *Mutex) Path() string { return m.path }

// Acquire blocks until the caller holds the lock, first come first served,
// and returns its Lease. When ctx ends first it returns an error matching
// ctx's (context.DeadlineExceeded, context.Canceled), and its place in the
// queue is gone. Every call queues on its own: a Mutex is not reentrant.
func (m *Mutex) Acquire(ctx context.Context) (*zklock.Lease, error) {
	return m.c.acquire(ctx, "acquire", m.path, "", false)
}

// TryAcquire takes the lock only if nobody holds it or waits for it;
// otherwise it returns an error matching zklock.ErrLocked. It never waits.
func (m *Mutex) TryAcquire(ctx context.Context) (*zklock.Lease, error) {
	return m.c.acquire(ctx, "try-acquire", m.path, "", true)
}

// acquire queues on path and waits for the grant, ctx's end or Close. Its
// failures are wrapped in a *zklock.OpError naming op and path.
func (c *Client) acquire(ctx context.Context, op, path, value string, try bool) (*zklock.Lease, error) {
	fail := func(err error) (*zklock.Lease, error) {
		return nil, &zklock.OpError{Op: op, Path: path, Err: err}
	}
	s := c.s
	s.mu.Lock()
	switch {
	case c.closed:
		s.mu.Unlock()
		return fail(zklock.ErrClosed)
	case ctx.Err() != nil:
		s.mu.Unlock()
		return fail(ctxErr(ctx))
	case try && len(s.queue(path).entries) > 0:
		s.mu.Unlock()
		return fail(zklock.ErrLocked)
	}
	e := &entry{c: c, path: path, value: value, done: make(chan struct{})}
	s.append(e)
	s.mu.Unlock()
	select {
	case <-e.done:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case e.err != nil:
		return fail(e.err)
	case e.lease != nil:
		return e.lease, nil // granted, even if ctx ended at the same moment
	}
	s.remove(e)
	return fail(ctxErr(ctx))
}

// ctxErr is ctx's error as zklock reports it.
func ctxErr(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("zklock: %w (%w)", ctx.Err(), cause)
	}
	return fmt.Errorf("zklock: %w", ctx.Err())
}

// validatePath is zklock's own rule for lock paths.
func validatePath(p string) error { return zklock.ValidatePath(p) }
