package zklock

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock/internal/wire"
)

// Client is a ZooKeeper session used for locks. It is safe for concurrent use.
// Close releases every lease it holds and removes every queue node it created.
type Client struct {
	conn    *zk.Conn
	ownConn bool
	me      *identity // who the client is in its lock nodes (owner.go)
	opts    options
	log     *slog.Logger
	wire    *wire.Tap // nil when the caller brought the connection
	handler *eventHandler

	lifecycle                // closing, the leases held, the goroutines in flight
	connClosed chan struct{} // closed once Close has closed an owned connection
	closeOnce  sync.Once
	eventsEnd  chan struct{} // closed when the event goroutine ends

	session *sessionTracker // session.go's, under its own lock

	holds   holdTable    // reentrant.go's, under its own lock
	parents *parentMaker // parents.go's, under its own lock
	cleaner *cleaner
	clock   *lossClock
	keep    *keepAlive // nil without a wire: no leader's word to keep
	atOnce  *atOnce    // which paths' last acquisitions held at once (listwatch.go)
}

func newClient(conn *zk.Conn, own bool, w *wire.Tap, o options) *Client {
	c := &Client{
		conn:       conn,
		ownConn:    own,
		me:         newIdentity(o.maxHold),
		opts:       o,
		log:        o.logger,
		wire:       w,
		handler:    newEventHandler(o.onEvent),
		lifecycle:  newLifecycle(),
		connClosed: make(chan struct{}),
		eventsEnd:  make(chan struct{}),
		holds:      holdTable{byPath: make(map[string]map[string]*ownerHold)},
		atOnce:     newAtOnce(),
	}
	c.parents = &parentMaker{c: c}
	states := newStateFeed()
	c.session = newSessionTracker(conn, c.log, states, c.closing)
	c.cleaner = newCleaner(conn, c.session.ended, o)
	c.clock = newLossClock(conn, w, c.session, states, o)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.clock.run(c.closing)
	}()
	if w != nil {
		c.keep = newKeepAlive(conn, w, o.sessionTimeout, c.clock.untilLossDeadline, c.spawn, c.closing)
	}
	return c
}

// ID returns the client's random id, recorded in its lock nodes.
func (c *Client) ID() string { return c.me.id }

// Conn returns the underlying connection, for requests zklock does not make.
func (c *Client) Conn() *zk.Conn { return c.conn }

// SessionTimeout returns the session timeout the server granted (it clamps
// the one asked for to its minSessionTimeout..maxSessionTimeout), or the
// one asked for (WithSessionTimeout) before the first session and on a
// client built by NewClient, whose handshake zklock does not see. Derive
// bounds from it, not from the one asked for.
func (c *Client) SessionTimeout() time.Duration { return c.clock.granted() }

// Close ends every wait with ErrClosed (removing its queue node), releases
// every lease, runs pending cleanups, closes the connection if Connect opened
// it, and waits for zklock's goroutines. It is idempotent and returns nil.
//
// Close takes at most about the cleanup timeout (WithCleanupTimeout) plus a
// second when it owns the connection, whatever state the connection is in,
// and about a second when the client has no working connection (or its
// leases are already presumed lost): deletes that cannot finish by then are
// abandoned by closing the session, which removes every ephemeral node it
// holds once the server sees it gone. On a connection the caller brought
// (NewClient), Close waits for those deletes until they finish or the session
// ends.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		leases := c.beginClose()
		// Without an answering server, nothing is waited for: closing the
		// session is what removes its nodes then.
		wait := c.opts.cleanupTimeout
		if c.ownConn && !c.clock.answering() {
			wait = 0
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		for _, l := range leases {
			l.releaseOnClose(ctx)
		}
		c.drain()
		if c.ownConn {
			// Waiters, lease monitors and background deletes, as long as the
			// deadline allows (closing the session ends the rest), so that
			// the deletes that finish schedule their cleanups before the
			// cleaner runs them.
			waitGroupCtx(ctx, &c.wg)
		}
		c.cleaner.close(ctx)
		if c.ownConn {
			c.closeConn()
		}
		c.wg.Wait()
		c.cleaner.wait()
		<-c.eventsEnd
		c.handler.wait(time.Second)
		c.session.end()
	})
	return nil
}

// closeConn closes an owned connection within about a second. go-zookeeper's
// Close waits up to a second for the server to confirm the session's end,
// and its loop may sit in a handshake with a server that never answers (its
// read deadline is ten times the receive timeout): closing the sockets zklock
// dialled ends that. With a live session the close request goes first, so
// the server removes the session's nodes at once.
func (c *Client) closeConn() {
	if c.conn.State() != zk.StateHasSession {
		c.wire.Shutdown()
	}
	c.conn.Close()
	c.wire.Shutdown()
	close(c.connClosed)
}

// waitGroupCtx waits for wg or ctx, whichever comes first.
func waitGroupCtx(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// ValidatePath reports whether p can be a lock path, with an error matching
// ErrInvalidPath if not. NewMutex and NewReentrantMutex apply it too.
func ValidatePath(p string) error { return validatePath(p) }
