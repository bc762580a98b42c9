package zklocktest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/zklock/zklock"
)

// Server is the shared state an ensemble keeps: one queue per lock path and
// the token counter. Its clients contend as processes on one ZooKeeper do.
// A Server is safe for concurrent use; its zero value is not usable, call
// New.
type Server struct {
	mu      sync.Mutex
	zxid    int64 // the last token given: one counter for all paths, as ZooKeeper's zxid
	clients int
	queues  map[string]*queue
	held    map[*zklock.Lease]*entry
}

// queue is one lock path's contenders, in order: the first holds.
type queue struct {
	seq     int64 // the last sequence number given under the path
	entries []*entry
	changed chan struct{} // closed and replaced when the holder changes
}

// entry is one contender's node: waiting until granted, then held.
type entry struct {
	c          *Client
	path, node string
	seq, token int64
	value      string        // an election's published value
	done       chan struct{} // closed when granted, or when the wait ended (err)
	err        error         // why the wait ended without a grant
	lease      *zklock.Lease // set at the grant
	end        func(error)
}

// New returns an empty Server.
func New() *Server {
	return &Server{queues: make(map[string]*queue), held: make(map[*zklock.Lease]*entry)}
}

// NewClient returns a new client of s: one process's session.
func (s *Server) NewClient() *Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients++
	return &Client{s: s, id: s.clients, closing: make(chan struct{})}
}

// Holder returns the lease that holds path now, or nil: for a test to take
// away a lease that the code under test keeps to itself
// (srv.Lose(srv.Holder(path))).
func (s *Server) Holder(path string) *zklock.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[path]; q != nil && len(q.entries) > 0 {
		return q.entries[0].lease
	}
	return nil
}

// Lose takes l away as someone deleting its node would: l's Done closes
// and its Err matches zklock.ErrLockLost, then the next waiter holds. It
// does nothing if l has ended or was not granted by s.
func (s *Server) Lose(l *zklock.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.held[l]
	if e == nil {
		return
	}
	e.end(fmt.Errorf("%w: node %s was deleted by someone else", zklock.ErrLockLost, e.node))
	s.remove(e)
}

// Expire expires the session of the client that holds l: every lease of
// that client is lost (Err matches zklock.ErrLockLost), each before its lock
// goes to anyone else, and the client's waiting Acquires and Campaigns go
// to the back of their queues with new nodes. The client stays usable, as
// a zklock client on its next session. It does nothing if l has ended or
// was not granted by s.
func (s *Server) Expire(l *zklock.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.held[l]
	if e == nil {
		return
	}
	waits, leases := s.entriesOf(e.c)
	for _, x := range waits { // off their queues first: none may be granted meanwhile
		s.remove(x)
	}
	for _, x := range leases {
		x.end(fmt.Errorf("%w: session expired", zklock.ErrLockLost))
		s.remove(x)
	}
	for _, x := range waits {
		s.append(x)
	}
}

// entriesOf lists c's nodes on every path that wait and that hold, each
// in the order of their tokens; s.mu is held.
func (s *Server) entriesOf(c *Client) (waits, leases []*entry) {
	for _, q := range s.queues {
		for _, x := range q.entries {
			if x.c != c {
				continue
			}
			if x.lease == nil {
				waits = append(waits, x)
			} else {
				leases = append(leases, x)
			}
		}
	}
	byToken := func(a, b *entry) int { return cmp.Compare(a.token, b.token) }
	slices.SortFunc(waits, byToken)
	slices.SortFunc(leases, byToken)
	return waits, leases
}

// queue returns path's queue, made if missing; s.mu is held.
func (s *Server) queue(path string) *queue {
	q := s.queues[path]
	if q == nil {
		q = &queue{changed: make(chan struct{})}
		s.queues[path] = q
	}
	return q
}

// append gives e a new node at the back of its path's queue, and grants it
// if nobody is ahead; s.mu is held.
func (s *Server) append(e *entry) {
	q := s.queue(e.path)
	q.seq++
	s.zxid++
	e.seq, e.token = q.seq, s.zxid
	e.node = fmt.Sprintf("%s/_c_zklocktest-%d-lock-%010d", e.path, e.c.id, e.seq)
	q.entries = append(q.entries, e)
	s.grantHead(q)
}

// remove takes e off its queue, if it is there, and grants the next
// holder; s.mu is held.
func (s *Server) remove(e *entry) {
	if e.lease != nil {
		delete(s.held, e.lease)
	}
	q := s.queue(e.path)
	i := slices.Index(q.entries, e)
	if i < 0 {
		return
	}
	q.entries = slices.Delete(q.entries, i, i+1)
	switch {
	case i > 0:
	case len(q.entries) == 0:
		q.signal() // nobody holds
	default:
		s.grantHead(q)
	}
}

// grantHead makes the first of q hold, if it only waits; s.mu is held.
func (s *Server) grantHead(q *queue) {
	head := q.entries[0]
	if head.lease != nil {
		return
	}
	head.lease, head.end = zklock.NewLease(head, zklock.LeaseInfo{Node: head.node, Sequence: head.seq, Token: head.token})
	s.held[head.lease] = head
	close(head.done)
	q.signal()
}

// signal tells the observers of q that its holder changed; s.mu is held.
func (q *queue) signal() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// Release is the LeaseBackend's: the node goes, the next waiter holds. If
// ctx has ended it returns ctx's error all the same, as zklock does: its
// Release of a held lease with an ended ctx ends the lease (Err
// ErrReleased), deletes the node in the background and returns ctx's error.
func (e *entry) Release(ctx context.Context) error {
	s := e.c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(e)
	if ctx.Err() != nil {
		return ctxErr(ctx)
	}
	return nil
}
