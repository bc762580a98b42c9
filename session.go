package zklock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// This file follows the client's ZooKeeper session. go-zookeeper opens a new
// session by itself after an expiry; ephemeral nodes and leases belong to the
// session they were made in.
//
// go-zookeeper drops events when its 6-slot channel is full, and after an
// expiry it sends about ten within milliseconds. So zklock never depends on
// seeing every event: a client that owns its connection reads them from
// go-zookeeper's callback (called for every event, never dropped), and every
// decision cross-checks conn.State() and conn.SessionID() (see syncSession).

// session is one ZooKeeper session of the client's connection.
type session struct {
	id   int64
	lost chan struct{} // closed when the session expires or the client closes
	once sync.Once
}

func newSession(id int64) *session { return &session{id: id, lost: make(chan struct{})} }

func (s *session) end() { s.once.Do(func() { close(s.lost) }) }

func (s *session) ended() bool { return isDone(s.lost) }

// errConnEnded ends every wait of a client whose connection its owner closed
// (NewClient): no session will come again.
var errConnEnded = fmt.Errorf("%w: its ZooKeeper connection was closed", ErrClosed)

// onEvent updates the session from one event. It runs on go-zookeeper's
// goroutines (callback) or zklock's event goroutine and never blocks.
func (c *Client) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	states := c.clock.states
	switch ev.State {
	case zk.StateHasSession:
		c.syncSession()
		if !c.clock.due() {
			states.set(StateConnected) // or reconnected, after a drop
		}
	case zk.StateExpired:
		c.syncSession()
		states.set(StateExpired)
	case zk.StateDisconnected:
		states.set(StateSuspended)
		if c.wire == nil {
			// Without the wire clock the earliest possible expiry is unknown:
			// leases are presumed lost at once (see NewClient).
			c.presumeLeasesLost()
			states.set(StateLost)
		}
	}
}

// connSession returns the id of the connection's live session, or 0.
func (c *Client) connSession() int64 {
	id := c.conn.SessionID()
	if id == 0 || c.conn.State() != zk.StateHasSession || c.conn.SessionID() != id {
		return 0
	}
	return id
}

// syncSession brings c.sess in line with the connection: a session id that
// changed means the old session is over (expired: go-zookeeper sets the id to
// zero, then to the next session's). Events only make this happen sooner.
//
// The connection's state is read under c.mu, so two syncs cannot act on
// readings taken in the other order; the returned channel is the one to wait
// on for the next session, read in the same critical section (no missed
// wake-up).
func (c *Client) syncSession() (*session, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	live := c.connSession()
	current := c.conn.SessionID()
	if c.sess.id != current && !c.sess.ended() {
		c.log.Warn("zklock: session expired", "session", fmt.Sprintf("0x%x", c.sess.id))
		c.sess.end()
		if c.sess.id != 0 && !c.isClosed() && !c.connIsEnded() {
			c.clock.states.set(StateExpired)
		}
	}
	if live != 0 && c.sess.ended() && !c.isClosed() && !c.connIsEnded() {
		c.sess = newSession(live)
		close(c.ready)
		c.ready = make(chan struct{})
		c.log.Info("zklock: session established", "session", fmt.Sprintf("0x%x", live))
		c.clock.states.set(StateConnected) // reconnected, after an expiry
	}
	return c.sess, c.ready
}

func (c *Client) connIsEnded() bool { return isDone(c.connEnded) }

// session returns the current session, which may have ended.
func (c *Client) session() *session {
	s, _ := c.syncSession()
	return s
}

// liveSession waits until the client has a session that has not ended.
func (c *Client) liveSession(ctx context.Context) (*session, error) {
	for {
		s, ready := c.syncSession()
		if !s.ended() {
			return s, nil
		}
		if err := c.waitReady(ctx, ready); err != nil {
			return nil, err
		}
	}
}

// waitReady waits for ready, the sign of the next session.
func (c *Client) waitReady(ctx context.Context, ready <-chan struct{}) error {
	select {
	case <-ready:
		return nil
	case <-c.closing:
		return ErrClosed
	case <-c.connEnded:
		return errConnEnded
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for a session: %w", ErrUnreachable, ctxCause(ctx))
	}
}

// sessionFor returns the client's session with the given id, waiting for the
// client to catch up with go-zookeeper; errSessionOver if that session is
// over (its ephemeral nodes are gone).
func (c *Client) sessionFor(ctx context.Context, id int64) (*session, error) {
	for {
		s, ready := c.syncSession()
		if s.id == id {
			if s.ended() {
				return nil, errSessionOver
			}
			return s, nil
		}
		if c.conn.SessionID() != id {
			return nil, errSessionOver
		}
		if err := c.waitReady(ctx, ready); err != nil {
			return nil, err
		}
	}
}

// eventLoop reads go-zookeeper's event channel until it closes, or until
// Close on a connection the caller owns. It never blocks on anything else:
// the user's handler runs on its own goroutine.
func (c *Client) eventLoop(events <-chan zk.Event, track bool) {
	defer close(c.eventsEnd)
	defer c.handler.close()
	for {
		var ev zk.Event
		var ok bool
		select {
		case ev, ok = <-events:
		case <-c.closing:
			if c.ownConn {
				// Drain until go-zookeeper closes the channel: its loop has ended then.
				for range events {
				}
				c.endConn()
			}
			return
		}
		if !ok {
			c.endConn()
			return
		}
		if track {
			c.onEvent(ev)
		}
		c.handler.push(ev)
	}
}

// endConn records that go-zookeeper's loop has ended: the connection was
// closed, by Close or (NewClient) by its owner.
func (c *Client) endConn() {
	close(c.connEnded)
	c.mu.Lock()
	c.sess.end()
	c.mu.Unlock()
}

// maxQueuedEvents bounds what a slow handler can make zklock hold.
const maxQueuedEvents = 4096

// eventHandler runs the user's WithEventHandler on its own goroutine, fed by
// a queue, so a slow handler never stalls zklock's view of the session.
type eventHandler struct {
	fn      func(zk.Event)
	mu      sync.Mutex
	queue   []zk.Event
	wake    chan struct{}
	closed  bool
	dropped int
	done    chan struct{}
}

func newEventHandler(fn func(zk.Event)) *eventHandler {
	h := &eventHandler{fn: fn, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if fn == nil {
		close(h.done)
		return h
	}
	go h.run()
	return h
}

func (h *eventHandler) push(ev zk.Event) {
	if h.fn == nil {
		return
	}
	h.mu.Lock()
	if len(h.queue) < maxQueuedEvents {
		h.queue = append(h.queue, ev)
	} else {
		h.dropped++
	}
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *eventHandler) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *eventHandler) run() {
	defer close(h.done)
	for range h.wake {
		for {
			h.mu.Lock()
			batch, closed := h.queue, h.closed
			h.queue = nil
			h.mu.Unlock()
			for _, ev := range batch {
				h.fn(ev)
			}
			if closed && len(batch) == 0 {
				return
			}
			if len(batch) == 0 {
				break
			}
		}
	}
}

// wait waits for the handler goroutine to finish its queue, at most d.
func (h *eventHandler) wait(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-h.done:
	case <-t.C:
	}
}
