package wire

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Tap watches the bytes between go-zookeeper and the server. go-zookeeper
// exposes neither the session timeout the server granted nor when the server
// last confirmed the session, and both decide when a held lock must be
// presumed lost. It also tells a caller when a queued request has reached the
// socket, which lets a create and the listing after it share one round trip.
//
// go-zookeeper writes exactly one packet per Write; replies to a session's
// requests come back in the order sent (ZooKeeper serves a session FIFO), so a
// queue of send times matched against reply frames gives, for every reply, the
// moment its request left: the server cannot have touched the session earlier.
//
// A Tap is safe for concurrent use. The methods that a client without a Tap
// may call (ConnEpoch, Shutdown) accept a nil *Tap.
type Tap struct {
	epoch  time.Time          // monotonic base for the nanosecond stamps below
	ctx    context.Context    // cancelled by shutdown: dials end
	cancel context.CancelFunc // shutdown

	mu       sync.Mutex
	conns    map[*wireConn]struct{} // open connections, closed by shutdown
	closed   bool
	lastErr  error          // why the newest connection failed, for Connect's error
	writes   uint64         // packets written, over all connections
	expected []*Expectation // packets awaited by what they carry
	heard    contactMark    // the newest request a server answered (contact.go)
	proven   contactMark    // the newest request the leader is known to have heard (proof.go)
	session  int64          // the session of the newest connect response: proven and granted are its
	current  *wireConn      // the newest connection: where a sync would go
	granted  time.Duration  // session timeout granted: the smallest of the session's connect responses
	dials    uint64         // connections opened so far: the connection epoch

	// rearm wakes the client's loss clock when its nap may be too long: a
	// connect response changed the granted timeout, or contact resumed
	// after the clock found a deadline passed (a watched contactMark).
	rearm chan struct{}

	tls         *tls.Config // every connection is TLS, the handshake done in dial
	chroot      *chroot     // the connect string's chroot, nil for none
	handshaking string      // the address of a TLS handshake under way, "" for none
	refused     refusals    // permanent failures per address (refusal.go)
	members     *members    // the servers dialled (members.go); nil before HostProvider
}

// Config is what a Tap is built with: the client's options that reach the
// bytes.
type Config struct {
	// TLS makes every connection TLS, with the handshake inside the dial
	// (zklock's WithTLS); nil for plaintext.
	TLS *tls.Config
	// Chroot is the connect string's chroot ("/app", a valid path without a
	// trailing slash); "" for none.
	Chroot string
	// InvalidPath is wrapped in the error refusing a request under the
	// chroot whose path ZooKeeper's client would reject (zklock's
	// ErrInvalidPath), so callers match it as they match their own checks.
	InvalidPath error
}

// New returns a Tap for one client's connections.
func New(cfg Config) *Tap {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Tap{epoch: time.Now(), ctx: ctx, cancel: cancel, conns: make(map[*wireConn]struct{}), rearm: make(chan struct{}, 1),
		tls: cfg.TLS, refused: newRefusals()}
	if cfg.Chroot != "" {
		w.chroot = newChroot(cfg.Chroot, cfg.InvalidPath)
	}
	return w
}

func (w *Tap) now() int64 { return int64(time.Since(w.epoch)) }

// errWireClosed refuses dials once the client is closing.
var errWireClosed = errors.New("client closing")

// Dial is a zk.Dialer that wraps every connection go-zookeeper opens.
func (w *Tap) Dial(network, address string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	raw, err := d.DialContext(w.ctx, network, address)
	if err != nil {
		if w.ctx.Err() == nil {
			w.setErr(address, err)
		}
		return nil, err
	}
	nc := raw
	if w.tls != nil {
		if nc, err = w.handshake(raw, address, timeout); err != nil {
			raw.Close()
			if w.ctx.Err() == nil {
				w.setErr(address, err)
			}
			return nil, err
		}
	}
	if w.chroot != nil {
		nc = newChrootConn(nc, w.chroot)
	}
	c := &wireConn{Conn: nc, raw: raw, w: w, addr: address}
	bound := w.handshakeBound(timeout)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		raw.Close()
		return nil, errWireClosed
	}
	w.refused.outcome(address, nil)
	w.conns[c] = struct{}{}
	w.current = c
	w.dials++ // before go-zookeeper reads a byte of the new connection
	c.boundHandshake(bound)
	return c, nil
}

// ConnEpoch counts the connections opened so far. Replies and watch events of
// one connection come in the order the server made them; across a reconnect
// they do not (go-zookeeper restores watches in no particular order). 0
// without a Tap.
func (w *Tap) ConnEpoch() uint64 {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dials
}

// Shutdown closes every connection and refuses new ones: it ends a
// handshake that go-zookeeper would otherwise wait on for many seconds.
func (w *Tap) Shutdown() {
	if w == nil {
		return
	}
	w.cancel()
	w.mu.Lock()
	w.closed = true
	conns := w.conns
	w.conns = nil
	w.mu.Unlock()
	for c := range conns {
		c.closeRaw()
	}
}

// setErr records why a connection to addr failed.
func (w *Tap) setErr(addr string, err error) {
	w.mu.Lock()
	w.lastErr = err
	w.refused.outcome(addr, err)
	w.mu.Unlock()
}

// lastError is why the newest connection failed, if it did.
func (w *Tap) lastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// errSilent reports a server that accepted the connection and never
// answered the handshake: a port that is not ZooKeeper's (a TLS port, or a
// silent service), or a server too overloaded to reply.
var errSilent = errors.New("the server accepted the connection but never answered (is it ZooKeeper, and without TLS?)")

// Diagnose says why no session came: an open connection that never got a
// reply is silence; otherwise the last connection's error, if any.
func (w *Tap) Diagnose() error {
	w.mu.Lock()
	if isDone(w.refused.hopeless) {
		defer w.mu.Unlock()
		return w.refused.cause // the connection it came on may not be closed yet
	}
	conns := slices.Collect(maps.Keys(w.conns))
	lastErr := w.lastErr
	w.mu.Unlock()
	// Each connection's lock is taken without the Tap's: the reply parser
	// takes them in the other order.
	for _, c := range conns {
		// A connection just made (a redial) has not had time to hear
		// back: the last connection's error, if any, says more.
		if c.unanswered(w.now()-int64(silentAfter)) || (c.unanswered(w.now()) && lastErr == nil) {
			return errSilent
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.handshaking != "" {
		return fmt.Errorf("TLS handshake with %s: the server accepted the connection but has not answered (is it a TLS port?)", w.handshaking)
	}
	return w.lastErr
}

// silentAfter is how long a connection's first request must go unanswered
// before it is called silent when an earlier connection failed otherwise.
const silentAfter = 250 * time.Millisecond

// unanswered reports a connection that sent something no later than before
// (on the wire's clock) and got no frame back.
func (c *wireConn) unanswered(before int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frames == 0 && len(c.sent) > 0 && c.sent[0].at <= before
}

// writeCount is how many packets were written.
func (w *Tap) writeCount() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes
}

// Expectation is a packet awaited by a caller: the first one written that
// contains marker closes seen. Its reply's zxid is kept: for a create, that
// is the new node's creation zxid (the fencing token), with no read.
type Expectation struct {
	marker []byte
	seen   chan struct{}
	zxid   atomic.Int64 // set when the reply came without an error
}

// Expect lets a caller know that a request it queued has left: the
// Expectation's Seen is closed when a packet containing marker (a create's
// GUID, which its path carries) is written. Another request of the client
// written meanwhile does not count. Forget withdraws it.
func (w *Tap) Expect(marker string) *Expectation {
	e := &Expectation{marker: []byte(marker), seen: make(chan struct{})}
	w.mu.Lock()
	w.expected = append(w.expected, e)
	w.mu.Unlock()
	return e
}

// Forget withdraws the expectations of marker that no packet met yet.
func (w *Tap) Forget(marker string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expected = slices.DeleteFunc(w.expected, func(e *Expectation) bool { return string(e.marker) == marker })
}

// Seen is closed once the expected packet is written.
func (e *Expectation) Seen() <-chan struct{} { return e.seen }

// ReplyZxid is the zxid of the reply to the expected packet, 0 if none came
// (yet), or the reply was an error, or the packet was not seen.
func (e *Expectation) ReplyZxid() int64 { return e.zxid.Load() }

// sawWrite closes the expectations p fulfils and returns them; w.mu is held.
func (w *Tap) sawWrite(p []byte) []*Expectation {
	var met []*Expectation
	w.expected = slices.DeleteFunc(w.expected, func(e *Expectation) bool {
		if !bytes.Contains(p, e.marker) {
			return false
		}
		close(e.seen)
		met = append(met, e)
		return true
	})
	return met
}

// LastContact returns the latest moment the server is known to have heard
// from this client, and the session timeout it granted (0 before any).
func (w *Tap) LastContact() (time.Time, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.epoch.Add(time.Duration(w.heard.at)), w.granted
}

// WatchContact makes the next answer sent after seen wake the loss clock
// (Rearm), or wakes it at once if one came already.
func (w *Tap) WatchContact(seen time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.heard.watch(int64(seen.Sub(w.epoch))) {
		w.wakeClock()
	}
}

// Rearm delivers a wake-up when the client's loss clock should compute its
// nap again: the granted timeout arrived or changed, or contact resumed
// after WatchContact. It holds at most one pending wake-up.
func (w *Tap) Rearm() <-chan struct{} { return w.rearm }

// wakeClock asks the loss clock to compute its nap again; it never blocks.
func (w *Tap) wakeClock() {
	select {
	case w.rearm <- struct{}{}:
	default: // a wake-up is pending already
	}
}
