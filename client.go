package zklock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
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
}

// Connect dials ZooKeeper and returns once a session is established, or
// fails when ctx ends or the connect timeout (WithConnectTimeout, default
// DefaultConnectTimeout) passes, whichever comes first (plus up to about a
// second to close the attempt), whatever the server does (it may refuse the
// connection, accept it and never answer, or answer with something that is
// not ZooKeeper). That error matches ErrUnreachable
// and names the last cause. A cause that no retry changes (a server
// certificate not trusted or not valid for its name, a client certificate
// the server refuses) ends Connect at once, once every server has given it. A malformed server list fails at once with
// ErrInvalidOption, as does a WithFollowerLag too large for the session
// timeout the server granted. Close the client to end the session.
//
// Each entry of servers is host:port (port 2181 if omitted), or several such
// addresses separated by commas. As in ZooKeeper's connect string, a chroot
// may follow the last address ("zk1:2181,zk2:2181/app"): every path the
// client sends then lives under it, and paths come back as the caller gave
// them. Connect creates the chroot (and its ancestors) if it is missing.
func Connect(ctx context.Context, servers []string, opts ...Option) (*Client, error) {
	addrs, chroot, err := parseServers(servers)
	if err != nil {
		return nil, err
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeoutCause(ctx, o.connectTimeout,
		fmt.Errorf("no session within the connect timeout %v", o.connectTimeout))
	defer cancel()
	w := wire.New(wire.Config{TLS: o.tls, Chroot: chroot, InvalidPath: ErrInvalidPath})
	var client atomic.Pointer[Client]
	conn, events, err := zkConnect(addrs, w, o, &client)
	if err != nil {
		return nil, fmt.Errorf("zklock: connect: %w", err)
	}
	c := newClient(conn, true, w, o)
	client.Store(c)
	go c.eventLoop(events, false)
	err = c.firstSession(cctx)
	if err == nil {
		err = c.checkFollowerLag()
	}
	if err == nil {
		err = c.addAuth(cctx)
	}
	if err == nil {
		err = c.ensureChroot(cctx)
	}
	if err != nil {
		cause := w.Diagnose() // before Close shuts the wire
		c.Close()
		return nil, connectError(addrs, err, cause)
	}
	return c, nil
}

// zkConnect starts go-zookeeper on addrs, dialling through w. The callback
// sees every event (the channel drops some when full); it may fire before
// Connect has stored the client.
func zkConnect(addrs []string, w *wire.Tap, o options, client *atomic.Pointer[Client]) (*zk.Conn, <-chan zk.Event, error) {
	return zk.Connect(addrs, o.sessionTimeout,
		zk.WithDialer(w.Dial),
		zk.WithHostProvider(w.HostProvider()),
		zk.WithLogger(slogAdapter{o.logger}),
		zk.WithLogInfo(false),
		zk.WithEventCallback(func(ev zk.Event) {
			if c := client.Load(); c != nil {
				c.onEvent(ev)
			}
		}))
}

// connectError says why Connect failed: where it tried, what ended the wait,
// and the last thing the connection saw (a dial error, a reply that is not
// ZooKeeper's, silence).
func connectError(addrs []string, err, cause error) error {
	if !errors.Is(err, ErrUnreachable) {
		return err
	}
	where := strings.Join(addrs, ",")
	if cause == nil {
		return fmt.Errorf("%w (%s)", err, where)
	}
	return fmt.Errorf("%w (%s; last connection error: %w)", err, where, cause)
}

// checkFollowerLag refuses a WithFollowerLag that leaves a lease too little
// of the granted session timeout: the client pings every third of it, so a
// window shorter than that would presume healthy leases lost.
func (c *Client) checkFollowerLag() error {
	if c.wire == nil || c.opts.followerLag == 0 {
		return nil
	}
	granted := c.grantedTimeout()
	if limit := granted * 2 / 5; c.opts.followerLag >= limit {
		return fmt.Errorf("%w: follower lag %v leaves no time to hold a lease: the server granted a session timeout of %v, and the lag must stay below 40 %% of it (%v)",
			ErrInvalidOption, c.opts.followerLag, granted, limit)
	}
	return nil
}

// addAuth gives the session the client's credentials, under ctx, trying
// again after a dropped connection: go-zookeeper re-sends credentials after a
// reconnect only once the server has accepted them.
func (c *Client) addAuth(ctx context.Context) error {
	for _, a := range c.opts.auth {
		r := c.retrier(ctx, nil)
		for {
			_, err := call(ctx, c, func() (struct{}, error) { return struct{}{}, c.conn.AddAuth(a.scheme, a.auth) })
			kind := classify(err)
			if kind == errNone {
				break
			}
			if kind != errConnection {
				return fmt.Errorf("zklock: adding %s credentials: %w", a.scheme, err)
			}
			if err := r.wait(); err != nil {
				return err
			}
		}
	}
	return nil
}

// NewClient builds a Client on a connection the caller already has. zklock
// reads events from events (the channel zk.Connect returned), so pass
// WithEventHandler to keep seeing them. Close does not close conn; once its
// owner closes conn, every call on the client fails with ErrClosed.
//
// A client built this way cannot see when the server last heard from it, so a
// lease is presumed lost as soon as the connection drops rather than shortly
// before the session could expire; use Connect for the finer rule.
func NewClient(conn *zk.Conn, events <-chan zk.Event, opts ...Option) (*Client, error) {
	if conn == nil || events == nil {
		return nil, fmt.Errorf("%w: NewClient needs the connection and its event channel", ErrInvalidOption)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	c := newClient(conn, false, nil, o)
	c.session.sync()
	go c.eventLoop(events, true)
	for _, a := range c.opts.auth {
		// go-zookeeper re-sends these after every reconnect.
		if err := c.conn.AddAuth(a.scheme, a.auth); err != nil {
			c.log.Warn("zklock: adding auth failed", "scheme", a.scheme, "err", err)
		}
	}
	return c, nil
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
		holds:      holdTable{byPath: make(map[string]map[string]*hold)},
	}
	c.cleaner = newCleaner(conn, o)
	c.parents = &parentMaker{c: c}
	c.clock = newLossClock(c)
	c.session = newSessionTracker(conn, c.log, c.clock.states, c.closing)
	c.wg.Add(1)
	go c.clock.run()
	return c
}

// ID returns the client's random id, recorded in its lock nodes.
func (c *Client) ID() string { return c.me.id }

// Conn returns the underlying connection, for requests zklock does not make.
func (c *Client) Conn() *zk.Conn { return c.conn }

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

// slogAdapter gives go-zookeeper's Printf logger a slog destination.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Printf(format string, args ...any) {
	a.l.Debug("zk: " + fmt.Sprintf(format, args...))
}
