package zklock

// How a Client comes to be: Connect dials through the wire tap and waits for
// the first session; NewClient adopts a connection the caller made.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/go-zookeeper/zk"
	"github.com/zklock/zklock/internal/wire"
)

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
	followEnsemble(cctx, c, addrs)
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
// of the granted session timeout: the leader's word on a held lease may be
// up to about 60 % of the timeout old between two proofs (keepalive.go), so
// a deadline closer than that would presume healthy leases lost.
func (c *Client) checkFollowerLag() error {
	if c.wire == nil || c.opts.followerLag == 0 {
		return nil
	}
	granted := c.grantedTimeout()
	if limit := granted / 5; c.opts.followerLag >= limit {
		return fmt.Errorf("%w: follower lag %v leaves no time to hold a lease: the server granted a session timeout of %v, and the lag must stay below 20 %% of it (%v)",
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

// slogAdapter gives go-zookeeper's Printf logger a slog destination.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Printf(format string, args ...any) {
	a.l.Debug("zk: " + fmt.Sprintf(format, args...))
}
