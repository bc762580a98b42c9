package zklock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// Defaults for the options below.
const (
	DefaultSessionTimeout = 10 * time.Second
	DefaultCleanupDelay   = 5 * time.Second
	// DefaultCleanupTimeout bounds how long a failed or cancelled Acquire
	// waits for its queue node to be deleted before returning (the delete
	// goes on in the background until the node or the session is gone).
	DefaultCleanupTimeout = 10 * time.Second
)

// Option configures a Client. Invalid values make Connect and NewClient fail
// with ErrInvalidOption.
type Option func(*options) error

type options struct {
	sessionTimeout time.Duration
	acl            []zk.ACL
	auth           []authCred
	logger         *slog.Logger
	onEvent        func(zk.Event)
	cleanupDelay   time.Duration
	cleanupRoot    string
	cleanupTimeout time.Duration
	watchOwnNode   bool
	requeue        bool
	followerLag    time.Duration
}

type authCred struct {
	scheme string
	auth   []byte
}

func defaultOptions() options {
	return options{
		sessionTimeout: DefaultSessionTimeout,
		acl:            zk.WorldACL(zk.PermAll),
		logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		cleanupDelay:   DefaultCleanupDelay,
		cleanupTimeout: DefaultCleanupTimeout,
		watchOwnNode:   true,
		requeue:        true,
	}
}

// WithSessionTimeout sets the session timeout asked of the server (default
// DefaultSessionTimeout). The server may clamp it; zklock uses the one granted.
func WithSessionTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: session timeout %v must be positive", ErrInvalidOption, d)
		}
		o.sessionTimeout = d
		return nil
	}
}

// WithACL sets the ACL of every node zklock creates (default: world, all).
func WithACL(acl []zk.ACL) Option {
	return func(o *options) error {
		if len(acl) == 0 {
			return fmt.Errorf("%w: empty ACL", ErrInvalidOption)
		}
		o.acl = acl
		return nil
	}
}

// WithDigestAuth adds digest credentials ("user:password") to the session;
// combine with WithACL(zk.DigestACL(...)) to keep others off the lock nodes.
func WithDigestAuth(user, password string) Option {
	return func(o *options) error {
		if user == "" {
			return fmt.Errorf("%w: digest auth needs a user", ErrInvalidOption)
		}
		o.auth = append(o.auth, authCred{"digest", []byte(user + ":" + password)})
		return nil
	}
}

// WithLogger sends zklock's and go-zookeeper's log lines to l (default: none).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		o.logger = l
		return nil
	}
}

// WithEventHandler passes every event of the connection to fn, in order, on
// a goroutine of its own: a slow fn delays only itself, never zklock's view
// of the session. Events wait in a queue of up to 4096 while fn runs; beyond
// that, new ones are dropped. Close waits up to a second for fn to return.
func WithEventHandler(fn func(zk.Event)) Option {
	return func(o *options) error {
		o.onEvent = fn
		return nil
	}
}

// WithCleanupTimeout bounds how long a failing Acquire waits for its own
// node's deletion before it returns (default DefaultCleanupTimeout).
func WithCleanupTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: cleanup timeout %v must be positive", ErrInvalidOption, d)
		}
		o.cleanupTimeout = d
		return nil
	}
}

// WithOwnNodeWatch turns the holder's watch on its own node on or off
// (default on). With it, a lease notices at once when an operator or a tool
// deletes its node, and Token needs no extra round trip of the caller; it
// costs one read and one watch event per acquisition. Without it, deletion by
// someone else goes unnoticed until the session ends, and Token costs a read.
func WithOwnNodeWatch(on bool) Option {
	return func(o *options) error {
		o.watchOwnNode = on
		return nil
	}
}

// WithFollowerLag tells zklock how long a follower that has lost its leader
// may go on answering this client: ZooKeeper's syncLimit × tickTime (10 s
// with the sample configuration's tickTime=2000, syncLimit=5). Meanwhile the
// leader may already expire the session, so a lease's loss deadline moves
// that much earlier: the last moment the server surely heard from the client
// + 80 % of the session timeout − lag. Default 0, right for a standalone
// server; on an ensemble, set it, or keep syncLimit × tickTime below a fifth
// of the session timeout. A lag at or above 80 % of the session timeout ends
// every lease at once.
func WithFollowerLag(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: follower lag %v is negative", ErrInvalidOption, d)
		}
		o.followerLag = d
		return nil
	}
}

// WithRequeueOnExpiry chooses what a waiting Acquire does when its session
// expires and its queue node vanishes with it: re-queue on the new session, at
// the back of the queue (true, the default), or fail with ErrSessionExpired.
func WithRequeueOnExpiry(requeue bool) Option {
	return func(o *options) error {
		o.requeue = requeue
		return nil
	}
}

// WithCleanupDelay sets how long after a lock path becomes empty the client
// deletes it (default DefaultCleanupDelay; 0 disables the cleaner). Close runs
// pending cleanups at once.
func WithCleanupDelay(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: cleanup delay %v is negative", ErrInvalidOption, d)
		}
		o.cleanupDelay = d
		return nil
	}
}

// WithCleanupRoot lets the cleaner also delete the empty ancestors of a lock
// path that lie strictly below root (say "/locks" for "/locks/tenant/job"),
// and creates them as container nodes. Without it only the lock path itself
// is removed. root itself and everything above it are never deleted.
func WithCleanupRoot(root string) Option {
	return func(o *options) error {
		if root != "/" {
			if err := validatePath(root); err != nil {
				return fmt.Errorf("%w: cleanup root: %w", ErrInvalidOption, err)
			}
		}
		o.cleanupRoot = root
		return nil
	}
}

// Client is a ZooKeeper session used for locks. It is safe for concurrent use.
// Close releases every lease it holds and removes every queue node it created.
type Client struct {
	conn    *zk.Conn
	ownConn bool
	id      string // random per client: half of every default owner identity
	opts    options
	log     *slog.Logger
	wire    *wire // nil when the caller brought the connection
	host    string
	pid     int
	handler *eventHandler

	closing    chan struct{} // closed by Close
	connClosed chan struct{} // closed once Close has closed an owned connection
	connEnded  chan struct{} // closed when go-zookeeper's event channel closed: no session will come again
	closeOnce  sync.Once
	eventsEnd  chan struct{} // closed when the event goroutine ends
	wg         sync.WaitGroup

	mu      sync.Mutex // guards the four fields below
	sess    *session
	ready   chan struct{} // closed and replaced when a new session is established
	leases  map[*Lease]struct{}
	drained bool // Close has released the leases: no new release goroutines

	holds      holdTable        // reentrant.go's, under its own lock
	containers containerSupport // parents.go's, under its own lock
	cleaner    *cleaner
}

// Connect dials ZooKeeper and returns once a session is established or ctx
// ends. Close the client to end the session. Connect returns within about a
// second of ctx's deadline whatever the server does (it may accept the
// connection and never answer, or answer with something that is not
// ZooKeeper).
func Connect(ctx context.Context, servers []string, opts ...Option) (*Client, error) {
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: no servers", ErrInvalidOption)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	w := newWire()
	// The callback sees every event (the channel drops some when full); it
	// may fire before Connect has built the client.
	var client atomic.Pointer[Client]
	conn, events, err := zk.Connect(servers, o.sessionTimeout,
		zk.WithDialer(w.dial),
		zk.WithLogger(slogAdapter{o.logger}),
		zk.WithLogInfo(false),
		zk.WithEventCallback(func(ev zk.Event) {
			if c := client.Load(); c != nil {
				c.onEvent(ev)
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("zklock: connect: %w", err)
	}
	c := newClient(conn, true, w, o)
	client.Store(c)
	go c.eventLoop(events, false)
	_, err = c.liveSession(ctx)
	if err == nil {
		err = c.addAuth(ctx)
	}
	if err != nil {
		c.Close()
		if werr := w.lastError(); werr != nil {
			return nil, fmt.Errorf("%w (last connection error: %w)", err, werr)
		}
		return nil, err
	}
	return c, nil
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
	c.syncSession()
	go c.eventLoop(events, true)
	for _, a := range c.opts.auth {
		// go-zookeeper re-sends these after every reconnect.
		if err := c.conn.AddAuth(a.scheme, a.auth); err != nil {
			c.log.Warn("zklock: adding auth failed", "scheme", a.scheme, "err", err)
		}
	}
	return c, nil
}

func buildOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

func newClient(conn *zk.Conn, own bool, w *wire, o options) *Client {
	var id [8]byte
	_, _ = rand.Read(id[:])
	host, _ := os.Hostname()
	c := &Client{
		conn:       conn,
		ownConn:    own,
		id:         hex.EncodeToString(id[:]),
		opts:       o,
		log:        o.logger,
		wire:       w,
		host:       host,
		pid:        os.Getpid(),
		handler:    newEventHandler(o.onEvent),
		closing:    make(chan struct{}),
		connClosed: make(chan struct{}),
		connEnded:  make(chan struct{}),
		eventsEnd:  make(chan struct{}),
		sess:       newSession(0),
		ready:      make(chan struct{}),
		leases:     make(map[*Lease]struct{}),
		holds:      holdTable{byPath: make(map[string]map[string]*hold)},
	}
	c.sess.end() // no session yet
	c.cleaner = newCleaner(c)
	return c
}

// ID returns the client's random id, recorded in its lock nodes.
func (c *Client) ID() string { return c.id }

// Conn returns the underlying connection, for requests zklock does not make.
func (c *Client) Conn() *zk.Conn { return c.conn }

func (c *Client) isClosed() bool { return isDone(c.closing) }

// Close ends every wait with ErrClosed (removing its queue node), releases
// every lease, runs pending cleanups, closes the connection if Connect opened
// it, and waits for zklock's goroutines. It is idempotent and returns nil.
//
// Close takes at most about the cleanup timeout (WithCleanupTimeout) plus a
// second when it owns the connection, whatever state the connection is in:
// deletes that cannot finish by then (the server is unreachable) are
// abandoned by closing the session, which removes every ephemeral node it
// holds once the server sees it gone. On a connection the caller brought
// (NewClient), Close waits for those deletes until they finish or the session
// ends.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		close(c.closing)
		leases := make([]*Lease, 0, len(c.leases))
		for l := range c.leases {
			leases = append(leases, l)
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.cleanupTimeout)
		defer cancel()
		for _, l := range leases {
			if !l.endOnClose() {
				continue
			}
			c.forgetLease(l)
			if _, err := c.removeWithin(ctx, l.q); err != nil {
				c.log.Warn("zklock: removing a lease's node on close", "node", l.Node(), "err", err)
			}
		}
		c.mu.Lock()
		c.drained = true
		c.mu.Unlock()
		c.cleaner.close(ctx)
		if c.ownConn {
			// Waiters, lease monitors and background deletes, as long as the
			// deadline allows; closing the session ends the rest.
			waitGroupCtx(ctx, &c.wg)
			c.closeConn()
		}
		c.wg.Wait()
		c.cleaner.wait()
		<-c.eventsEnd
		c.handler.wait(time.Second)
		c.mu.Lock()
		c.sess.end()
		c.mu.Unlock()
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
		c.wire.shutdown()
	}
	c.conn.Close()
	c.wire.shutdown()
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
