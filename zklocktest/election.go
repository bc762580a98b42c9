package zklocktest

import (
	"context"
	"fmt"

	"github.com/zklock/zklock"
)

// Election elects one leader among the campaigners on a path, in the order
// they joined, on the same queue as a Mutex on that path: the leader is the
// holder. Its methods are those of zklock's Election, so code written
// against an interface of them takes either.
type Election struct {
	c    *Client
	path string
}

// NewElection returns an Election on path. It checks the path as NewMutex
// does.
func (c *Client) NewElection(path string) (*Election, error) {
	if err := validatePath(path); err != nil {
		return nil, err
	}
	return &Election{c: c, path: path}, nil
}

// Path returns the election's path.
func (e *Election) Path() string { return e.path }

// Campaign joins the election with value and blocks until the caller leads,
// with Acquire's bounds and failures. The Leadership's Done, Err, Resign and
// Lease are a real zklock.Leadership's; Proclaim fails with an error matching
// errors.ErrUnsupported.
func (e *Election) Campaign(ctx context.Context, value string) (*zklock.Leadership, error) {
	l, err := e.c.acquire(ctx, "campaign", e.path, value, false)
	if err != nil {
		return nil, err
	}
	return zklock.NewLeadership(l, value), nil
}

// Leader returns who leads now (Node, Value, Token; Owner and Data are
// zero), or an error matching zklock.ErrNoLeader; zklock.ErrClosed on a
// closed client, and ctx's error if ctx has ended.
func (e *Election) Leader(ctx context.Context) (zklock.Leader, error) {
	s := e.c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case e.c.closed:
		return zklock.Leader{}, zklock.ErrClosed
	case ctx.Err() != nil:
		return zklock.Leader{}, ctxErr(ctx)
	}
	ld, _ := e.leaderLocked()
	if ld.Node == "" {
		return zklock.Leader{}, fmt.Errorf("%w on %s", zklock.ErrNoLeader, e.path)
	}
	return ld, nil
}

// leaderLocked reads the holder of the path and the channel closed at the
// next change; s.mu is held.
func (e *Election) leaderLocked() (zklock.Leader, <-chan struct{}) {
	q := e.c.s.queue(e.path)
	if len(q.entries) == 0 || q.entries[0].lease == nil {
		return zklock.Leader{}, q.changed
	}
	h := q.entries[0]
	return zklock.Leader{Node: h.node, Value: h.value, Token: h.token}, q.changed
}

// Observe sends the leader now, then the leader after every change (a zero
// Leader when nobody leads). The channel holds one value, and a reader that
// falls behind gets the latest. It is closed when ctx ends or the client
// closes, without a value if ctx had ended or the client was closed when
// Observe was called.
func (e *Election) Observe(ctx context.Context) <-chan zklock.Leader {
	out := make(chan zklock.Leader, 1)
	go func() {
		defer close(out)
		s := e.c.s
		for first, last := true, (zklock.Leader{}); ; first = false {
			s.mu.Lock()
			ld, changed := e.leaderLocked()
			closed := e.c.closed
			s.mu.Unlock()
			if closed || ctx.Err() != nil {
				return
			}
			if first || ld.Node != last.Node || ld.Value != last.Value {
				select { // replace what out holds: this goroutine is its only sender
				case <-out:
				default:
				}
				out <- ld
				last = ld
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			case <-e.c.closing:
				return
			}
		}
	}()
	return out
}
