package zklock

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// wire watches the bytes between go-zookeeper and the server. go-zookeeper
// exposes neither the session timeout the server granted nor when the server
// last confirmed the session, and both decide when a held lock must be
// presumed lost. It also tells a caller when a queued request has reached the
// socket, which lets a create and the listing after it share one round trip.
//
// go-zookeeper writes exactly one packet per Write; replies to a session's
// requests come back in the order sent (ZooKeeper serves a session FIFO), so a
// queue of send times matched against reply frames gives, for every reply, the
// moment its request left: the server cannot have touched the session earlier.
type wire struct {
	epoch  time.Time          // monotonic base for the nanosecond stamps below
	ctx    context.Context    // cancelled by shutdown: dials end
	cancel context.CancelFunc // shutdown

	mu       sync.Mutex
	conns    map[*wireConn]struct{} // open connections, closed by shutdown
	closed   bool
	lastErr  error          // why the newest connection failed, for Connect's error
	writes   uint64         // packets written, over all connections
	expected []*expectation // packets awaited by what they carry
	contact  int64          // send time (ns since epoch) of the newest request the server answered
	granted  time.Duration  // session timeout from the newest connect response
	dials    uint64         // connections opened so far: the connection epoch

	// rearm wakes the loss clock (lossclock.go) when its nap may be too long:
	// a connect response changed the granted timeout, or an answer came while
	// contactWatched (the clock found the deadline passed: contact resumed).
	rearm          chan struct{}
	contactWatched bool

	tls         *tls.Config // WithTLS: every connection is TLS, the handshake done in dial
	chroot      *chroot     // the connect string's chroot, nil for none
	handshaking string      // the address of a TLS handshake under way, "" for none
	refused     refusals    // permanent failures per address (refusal.go)
}

func newWire() *wire {
	ctx, cancel := context.WithCancel(context.Background())
	return &wire{epoch: time.Now(), ctx: ctx, cancel: cancel, conns: make(map[*wireConn]struct{}), rearm: make(chan struct{}, 1), refused: newRefusals()}
}

func (w *wire) now() int64 { return int64(time.Since(w.epoch)) }

// errWireClosed refuses dials once the client is closing.
var errWireClosed = errors.New("client closing")

// dial is a zk.Dialer that wraps every connection go-zookeeper opens.
func (w *wire) dial(network, address string, timeout time.Duration) (net.Conn, error) {
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
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		raw.Close()
		return nil, errWireClosed
	}
	w.refused.outcome(address, nil)
	w.conns[c] = struct{}{}
	w.dials++ // before go-zookeeper reads a byte of the new connection
	return c, nil
}

// connEpoch counts the connections opened so far. Replies and watch events of
// one connection come in the order the server made them; across a reconnect
// they do not (go-zookeeper restores watches in no particular order). 0
// without a wire.
func (w *wire) connEpoch() uint64 {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dials
}

// shutdown closes every connection and refuses new ones: it ends a
// handshake that go-zookeeper would otherwise wait on for many seconds.
func (w *wire) shutdown() {
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
func (w *wire) setErr(addr string, err error) {
	w.mu.Lock()
	w.lastErr = err
	w.refused.outcome(addr, err)
	w.mu.Unlock()
}

// lastError is why the newest connection failed, if it did.
func (w *wire) lastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// errSilent reports a server that accepted the connection and never
// answered the handshake: a port that is not ZooKeeper's (a TLS port, or a
// silent service), or a server too overloaded to reply.
var errSilent = errors.New("the server accepted the connection but never answered (is it ZooKeeper, and without TLS?)")

// diagnose says why no session came: an open connection that never got a
// reply is silence; otherwise the last connection's error, if any.
func (w *wire) diagnose() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if isDone(w.refused.hopeless) {
		return w.refused.cause // the connection it came on may not be closed yet
	}
	for c := range w.conns {
		// A connection just made (a redial) has not had time to hear
		// back: the last connection's error, if any, says more.
		if c.unanswered(w.now()-int64(silentAfter)) || (c.unanswered(w.now()) && w.lastErr == nil) {
			return errSilent
		}
	}
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
	return c.frames == 0 && len(c.sent) > 0 && c.sent[0] <= before
}

// writeCount is how many packets were written.
func (w *wire) writeCount() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes
}

// expectation is a packet awaited by a caller: the first one written that
// contains marker closes seen. Its reply's zxid is kept: for a create, that
// is the new node's creation zxid (the fencing token), with no read.
type expectation struct {
	marker []byte
	seen   chan struct{}
	zxid   atomic.Int64 // set when the reply came without an error
}

// expect lets a caller know that a request it queued has left: seen is
// closed when a packet containing marker (a create's GUID, which its path
// carries) is written. Another request of the client written meanwhile does
// not count. forget withdraws it.
func (w *wire) expect(marker string) *expectation {
	e := &expectation{marker: []byte(marker), seen: make(chan struct{})}
	w.mu.Lock()
	w.expected = append(w.expected, e)
	w.mu.Unlock()
	return e
}

func (w *wire) forget(marker string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expected = slices.DeleteFunc(w.expected, func(e *expectation) bool { return string(e.marker) == marker })
}

// replyZxid is the zxid of the reply to the expected packet, 0 if none came
// (yet), or the reply was an error, or the packet was not seen.
func (e *expectation) replyZxid() int64 { return e.zxid.Load() }

// sawWrite closes the expectations p fulfils and returns them; w.mu is held.
func (w *wire) sawWrite(p []byte) []*expectation {
	var met []*expectation
	w.expected = slices.DeleteFunc(w.expected, func(e *expectation) bool {
		if !bytes.Contains(p, e.marker) {
			return false
		}
		close(e.seen)
		met = append(met, e)
		return true
	})
	return met
}

// lastContact returns the latest moment the server is known to have heard
// from this client, and the session timeout it granted (0 before any).
func (w *wire) lastContact() (time.Time, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.epoch.Add(time.Duration(w.contact)), w.granted
}

type wireConn struct {
	net.Conn          // what go-zookeeper reads and writes: plaintext frames
	raw      net.Conn // the socket under TLS and the chroot; nil in tests
	w        *wire
	addr     string // the address dialled

	mu      sync.Mutex
	sent    []int64 // send times of requests not yet answered, oldest first
	lenBuf  [4]byte
	lenN    int
	left    int64    // payload bytes still to come in the current frame (int64: a length may exceed 2^31 on 32-bit)
	head    [16]byte // start of the current frame's payload
	headN   int
	handled bool // the current frame's header was processed
	frames  int  // frames read on this connection

	awaiting map[int32]*expectation // expected packets written here, by xid, until their reply

	// Read buffer, used only by go-zookeeper's receive goroutine.
	// go-zookeeper reads every reply in two reads (length, then payload);
	// the buffer serves both from one system call.
	rbuf       []byte
	rpos, rend int
	rerr       error // the error that ended the last fill, returned once the buffer is drained
}

// readBufSize holds many small replies; a larger read bypasses the buffer.
const readBufSize = 16 << 10

func (c *wireConn) Write(p []byte) (int, error) {
	now := c.w.now()
	c.mu.Lock()
	c.sent = append(c.sent, now)
	c.mu.Unlock()

	w := c.w
	w.mu.Lock()
	w.writes++
	var met []*expectation
	if len(w.expected) > 0 {
		met = w.sawWrite(p)
	}
	w.mu.Unlock()
	if len(met) > 0 && len(p) >= 8 {
		c.await(int32(binary.BigEndian.Uint32(p[4:8])), met[0]) // go-zookeeper writes [length][xid]...
	}
	return c.Conn.Write(p)
}

// await keeps e until the reply to the request with xid arrives.
func (c *wireConn) await(xid int32, e *expectation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.awaiting == nil {
		c.awaiting = make(map[int32]*expectation)
	}
	c.awaiting[xid] = e
}

func (c *wireConn) Read(p []byte) (int, error) {
	if c.rpos == c.rend {
		if c.rerr != nil {
			err := c.rerr
			c.rerr = nil
			return 0, err
		}
		if len(p) >= readBufSize {
			return c.fill(p)
		}
		if c.rbuf == nil {
			c.rbuf = make([]byte, readBufSize)
		}
		n, err := c.fill(c.rbuf)
		c.rpos, c.rend, c.rerr = 0, n, err
		if n == 0 {
			c.rerr = nil
			return 0, err
		}
	}
	n := copy(p, c.rbuf[c.rpos:c.rend])
	c.rpos += n
	return n, nil
}

// fill reads from the socket into b and parses what arrived, refusing a
// reply that is not ZooKeeper's before go-zookeeper believes its length and
// allocates it.
func (c *wireConn) fill(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		if perr := c.parse(b[:n]); perr != nil {
			c.w.setErr(c.addr, perr)
			c.closeRaw()
			return 0, perr
		}
	}
	if err != nil && c.w.ctx.Err() == nil && c.handshakeless() {
		c.w.setErr(c.addr, c.w.closedBeforeAnswer(err))
	}
	return n, err
}

// handshakeless reports a connection that has had no frame back yet.
func (c *wireConn) handshakeless() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frames == 0
}

func (c *wireConn) Close() error {
	c.w.mu.Lock()
	delete(c.w.conns, c)
	c.w.mu.Unlock()
	return c.closeRaw()
}

// closeRaw closes the socket itself: a TLS close would first try to send an
// alert, which a stalled connection can hold for seconds.
func (c *wireConn) closeRaw() error {
	if c.raw != nil {
		return c.raw.Close()
	}
	return c.Conn.Close()
}

// maxConnectResponse bounds the first frame: ZooKeeper's connect response is
// 36 or 37 bytes. Anything else (an HTTP server answers "HTTP", which reads
// as a length of 1.2 GB) is not ZooKeeper.
const (
	minConnectResponse = 20
	maxConnectResponse = 64
)

// errNotZooKeeper reports a server whose first reply is not a connect response.
// It is reported inside Connect's error, so it carries no prefix of its own.
var errNotZooKeeper = errors.New("the server's reply is not ZooKeeper's")

// parse walks frame boundaries: [4-byte length][payload]. Only the first 16
// payload bytes matter: the connect response's timeout, or a reply's xid.
func (c *wireConn) parse(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(b) > 0 {
		if c.left == 0 {
			k := copy(c.lenBuf[c.lenN:], b)
			c.lenN += k
			b = b[k:]
			if c.lenN < 4 {
				return nil
			}
			c.lenN = 0
			c.left = int64(binary.BigEndian.Uint32(c.lenBuf[:]))
			if c.frames == 0 && (c.left < minConnectResponse || c.left > maxConnectResponse) {
				if c.w.tls == nil && isTLSRecord(c.lenBuf[:]) {
					return fmt.Errorf("%w: it answered with TLS (%q): the port wants TLS, see WithTLS", errNotZooKeeper, c.lenBuf[:])
				}
				return fmt.Errorf("%w (first frame of %d bytes, starting %q)", errNotZooKeeper, c.left, c.lenBuf[:])
			}
			c.headN, c.handled = 0, false
			if c.left == 0 {
				continue
			}
		}
		take := int(min(int64(len(b)), c.left))
		if c.headN < len(c.head) {
			c.headN += copy(c.head[c.headN:], b[:take])
		}
		b = b[take:]
		c.left -= int64(take)
		if !c.handled && (c.headN == len(c.head) || c.left == 0) {
			c.handled = true
			c.frame()
		}
	}
	return nil
}

// frame handles one frame header; c.mu is held.
func (c *wireConn) frame() {
	c.frames++
	if c.frames == 1 {
		// Connect response: protocol version, then the granted timeout in ms.
		if c.headN >= 8 {
			ms := int32(binary.BigEndian.Uint32(c.head[4:8]))
			c.answered(time.Duration(ms)*time.Millisecond, true)
		}
		return
	}
	if c.headN < 4 {
		return
	}
	xid := int32(binary.BigEndian.Uint32(c.head[:4]))
	if xid == -1 {
		return // a watch notification: the server sends it unasked
	}
	if e, ok := c.awaiting[xid]; ok && c.headN == len(c.head) {
		delete(c.awaiting, xid)
		if binary.BigEndian.Uint32(c.head[12:16]) == 0 { // no error
			e.zxid.Store(int64(binary.BigEndian.Uint64(c.head[4:12])))
		}
	}
	c.answered(0, false)
}

// answered pops the oldest outstanding send time: the server has now heard
// from us at least as late as that.
func (c *wireConn) answered(granted time.Duration, connect bool) {
	if len(c.sent) == 0 {
		return
	}
	t := c.sent[0]
	c.sent = c.sent[1:]
	if connect && granted <= 0 {
		return // the session was refused (expired): no news of a live session
	}
	w := c.w
	w.mu.Lock()
	if t > w.contact {
		w.contact = t
		if w.contactWatched {
			w.contactWatched = false
			w.wakeClock()
		}
	}
	if connect && granted != w.granted {
		w.granted = granted
		w.wakeClock()
	}
	w.mu.Unlock()
}

// watchContact makes the next answer sent after seen wake the loss clock,
// or wakes it at once if one came already.
func (w *wire) watchContact(seen time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.epoch.Add(time.Duration(w.contact)).After(seen) {
		w.wakeClock()
		return
	}
	w.contactWatched = true
}

// wakeClock asks the loss clock to compute its nap again; it never blocks.
func (w *wire) wakeClock() {
	select {
	case w.rearm <- struct{}{}:
	default: // a wake-up is pending already
	}
}
