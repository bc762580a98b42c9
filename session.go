package zklock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// decision cross-checks conn.State() and conn.SessionID() (see sessionTracker.sync).

// session is one ZooKeeper session of the client's connection.
type session struct {
	id   int64
	lost chan struct{} // closed when the session expires or the client closes
	once sync.Once
}

func newSession(id int64) *session { return &session{id: id, lost: make(chan struct{})} }

func (s *session) end() { s.once.Do(func() { close(s.lost) }) }

func (s *session) ended() bool { return isDone(s.lost) }

// errSessionOver ends a retry whose session ended: its nodes are gone.
var errSessionOver = errors.New("zklock: session over")

// errConnEnded ends every wait of a client whose connection its owner closed
// (NewClient): no session will come again.
var errConnEnded = fmt.Errorf("%w: its ZooKeeper connection was closed", ErrClosed)

// sessionTracker is the client's record of its ZooKeeper session: which
// session is current, the channel that announces the next one, and whether
// the connection has ended for good. Every read cross-checks the connection
// (sync), so a dropped event only delays what it would have announced.
type sessionTracker struct {
	conn    *zk.Conn
	log     *slog.Logger
	states  *stateFeed      // the loss clock's: what users see (sessionstate.go)
	closing <-chan struct{} // the client's: closed by Close
	ended   chan struct{}   // closed when go-zookeeper's event channel closed: no session will come again

	mu    sync.Mutex // guards the two fields below
	cur   *session
	ready chan struct{} // closed and replaced when a new session is established
}

func newSessionTracker(conn *zk.Conn, log *slog.Logger, states *stateFeed, closing <-chan struct{}) *sessionTracker {
	t := &sessionTracker{conn: conn, log: log, states: states, closing: closing,
		ended: make(chan struct{}), cur: newSession(0), ready: make(chan struct{})}
	t.cur.end() // no session yet
	return t
}

// connSession returns the id of the connection's live session, or 0.
func (t *sessionTracker) connSession() int64 {
	id := t.conn.SessionID()
	if id == 0 || t.conn.State() != zk.StateHasSession || t.conn.SessionID() != id {
		return 0
	}
	return id
}

// sync brings t.cur in line with the connection: a session id that
// changed means the old session is over (expired: go-zookeeper sets the id to
// zero, then to the next session's). Events only make this happen sooner.
//
// The connection's state is read under t.mu, so two syncs cannot act on
// readings taken in the other order; the returned channel is the one to wait
// on for the next session, read in the same critical section (no missed
// wake-up).
func (t *sessionTracker) sync() (*session, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	live := t.connSession()
	current := t.conn.SessionID()
	closed := isDone(t.closing)
	if t.cur.id != current && !t.cur.ended() {
		t.log.Warn("zklock: session expired", "session", fmt.Sprintf("0x%x", t.cur.id))
		t.cur.end()
		if t.cur.id != 0 && !closed && !t.connIsEnded() {
			t.states.set(StateExpired)
		}
	}
	if live != 0 && t.cur.ended() && !closed && !t.connIsEnded() {
		t.cur = newSession(live)
		close(t.ready)
		t.ready = make(chan struct{})
		t.log.Info("zklock: session established", "session", fmt.Sprintf("0x%x", live))
		t.states.set(StateConnected) // reconnected, after an expiry
	}
	return t.cur, t.ready
}

func (t *sessionTracker) connIsEnded() bool { return isDone(t.ended) }

// current returns the current session, which may have ended.
func (t *sessionTracker) current() *session {
	s, _ := t.sync()
	return s
}

// live waits until the client has a session that has not ended.
func (t *sessionTracker) live(ctx context.Context) (*session, error) {
	for {
		s, ready := t.sync()
		if !s.ended() {
			return s, nil
		}
		if err := t.waitReady(ctx, ready); err != nil {
			return nil, err
		}
	}
}

// waitReady waits for ready, the sign of the next session.
func (t *sessionTracker) waitReady(ctx context.Context, ready <-chan struct{}) error {
	select {
	case <-ready:
		return nil
	case <-t.closing:
		return ErrClosed
	case <-t.ended:
		return errConnEnded
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for a session: %w", ErrUnreachable, ctxCause(ctx))
	}
}

// byID returns the client's session with the given id, waiting for the
// client to catch up with go-zookeeper; errSessionOver if that session is
// over (its ephemeral nodes are gone).
func (t *sessionTracker) byID(ctx context.Context, id int64) (*session, error) {
	for {
		s, ready := t.sync()
		if s.id == id {
			if s.ended() {
				return nil, errSessionOver
			}
			return s, nil
		}
		if t.conn.SessionID() != id {
			return nil, errSessionOver
		}
		if err := t.waitReady(ctx, ready); err != nil {
			return nil, err
		}
	}
}

// endConn records that go-zookeeper's loop has ended: the connection was
// closed, by Close or (NewClient) by its owner.
func (t *sessionTracker) endConn() {
	close(t.ended)
	t.end()
}

// end ends the current session (Close, once the connection is closed).
func (t *sessionTracker) end() {
	t.mu.Lock()
	t.cur.end()
	t.mu.Unlock()
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
