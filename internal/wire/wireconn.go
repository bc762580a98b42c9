package wire

// One connection under the wire: each packet's send time, the reply frames
// parsed as they are read (a first frame that is not ZooKeeper's connect
// response refused before go-zookeeper allocates it), and the answers that
// move the wire's contact forward.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

type wireConn struct {
	net.Conn          // what go-zookeeper reads and writes: plaintext frames
	raw      net.Conn // the socket under TLS and the chroot; nil in tests
	w        *Tap
	addr     string // the address dialled

	mu      sync.Mutex
	sent    []sentReq // requests not yet answered, oldest first
	lenBuf  [4]byte
	lenN    int
	left    int64    // payload bytes still to come in the current frame (int64: a length may exceed 2^31 on 32-bit)
	head    [16]byte // start of the current frame's payload
	headN   int
	handled bool // the current frame's header was processed
	frames  int  // frames read on this connection

	silenced atomic.Bool // closed by boundHandshake: no connect response in time

	awaiting map[int32]*Expectation // expected packets written here, by xid, until their reply
	unproven []answer               // answers the leader may not know of yet (proof.go)
	wrote    bool                   // the connect request is written: the rest carry opcodes

	// Read buffer, used only by go-zookeeper's receive goroutine.
	// go-zookeeper reads every reply in two reads (length, then payload);
	// the buffer serves both from one system call. A read waits on small,
	// which is all an idle connection holds; after a read that filled it,
	// the next ones use a shared buffer of readBufSize (wide), given back
	// once drained, so a fleet of sessions does not keep 16 KiB each for
	// the burst one of them may see.
	small      [smallReadSize]byte
	rbuf       []byte             // small[:], or the shared buffer taken (wide)
	wide       *[readBufSize]byte // the shared buffer rbuf is, until drained
	wantWide   bool               // the last fill filled small, or more: more is likely waiting
	rpos, rend int
	rerr       error // the error that ended the last fill, returned once the buffer is drained
}

// readBufSize holds many small replies; a larger read bypasses the buffer.
// smallReadSize holds the replies of a lock's requests (a create's, a
// listing of a queue of a dozen nodes, a watch event) and a ping's.
const (
	readBufSize   = 16 << 10
	smallReadSize = 1 << 10
)

// wideBufs are the read buffers shared by every connection of the process.
var wideBufs = sync.Pool{New: func() any { return new([readBufSize]byte) }}

// sentReq is a request written: when, and whether only the leader can
// complete it.
type sentReq struct {
	at       int64
	xid      int32 // its reply carries it back (the connect request has none)
	byLeader bool
}

func (c *wireConn) Write(p []byte) (int, error) {
	now := c.w.now()
	c.mu.Lock()
	// go-zookeeper writes [length][xid][opcode]...; the connect request,
	// first on every connection, has no opcode and is told apart by place.
	req := sentReq{at: now}
	if c.wrote && len(p) >= 12 {
		req.xid = int32(binary.BigEndian.Uint32(p[4:8]))
		req.byLeader = leaderOp(int32(binary.BigEndian.Uint32(p[8:12])))
	}
	c.wrote = true
	c.sent = append(c.sent, req)
	c.mu.Unlock()

	w := c.w
	w.mu.Lock()
	w.writes++
	var met []*Expectation
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
func (c *wireConn) await(xid int32, e *Expectation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.awaiting == nil {
		c.awaiting = make(map[int32]*Expectation)
	}
	c.awaiting[xid] = e
}

func (c *wireConn) Read(p []byte) (int, error) {
	if c.rpos == c.rend {
		if c.wide != nil { // drained: the shared buffer goes back before a read that may wait
			wideBufs.Put(c.wide)
			c.wide, c.rbuf = nil, nil
		}
		if c.rerr != nil {
			err := c.rerr
			c.rerr = nil
			return 0, err
		}
		if len(p) >= readBufSize {
			return c.fill(p)
		}
		c.rbuf = c.small[:]
		if c.wantWide {
			c.wide = wideBufs.Get().(*[readBufSize]byte)
			c.rbuf = c.wide[:]
		}
		n, err := c.fill(c.rbuf)
		c.wantWide = n >= smallReadSize
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
	if err != nil && c.w.ctx.Err() == nil && c.handshakeless() && !c.silenced.Load() {
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
	if c.w.current == c {
		c.w.current = nil
	}
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
		// Connect response: protocol version, the granted timeout in ms,
		// the session id.
		if c.headN == len(c.head) {
			ms := int32(binary.BigEndian.Uint32(c.head[4:8]))
			c.connected(time.Duration(ms)*time.Millisecond, int64(binary.BigEndian.Uint64(c.head[8:16])))
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
	ok := c.headN == len(c.head) && binary.BigEndian.Uint32(c.head[12:16]) == 0 // no error
	if e, found := c.awaiting[xid]; found && c.headN == len(c.head) {
		delete(c.awaiting, xid)
		if ok {
			e.zxid.Store(int64(binary.BigEndian.Uint64(c.head[4:12])))
		}
	}
	c.answered(xid, ok)
}

// take removes and returns the request xid answers: replies come in the
// order sent, but for an auth request, which the server answers at once,
// ahead of requests still in its pipeline. A reply whose xid matches none
// answers the oldest.
func (c *wireConn) take(xid int32) (sentReq, bool) {
	i := slices.IndexFunc(c.sent, func(r sentReq) bool { return r.xid == xid })
	if i < 0 {
		if len(c.sent) == 0 {
			return sentReq{}, false
		}
		i = 0
	}
	req := c.sent[i]
	c.sent = slices.Delete(c.sent, i, i+1)
	return req, true
}

// connected handles the connect response: the session's grant, and a send
// time the leader proved (it made or revalidated the session before the
// answer). A refused session (expired: timeout 0) is no news of a live one.
func (c *wireConn) connected(granted time.Duration, session int64) {
	req, found := c.take(0)
	if !found || granted <= 0 {
		return
	}
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.newGrant(granted, session)
	w.prove(req.at)
	if w.heard.advance(req.at) {
		w.wakeClock()
	}
}

// answered handles a reply: the server has now heard from us at least as
// late as its request was sent. ok: the reply carried no error.
func (c *wireConn) answered(xid int32, ok bool) {
	req, found := c.take(xid)
	if !found {
		return
	}
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	c.noteAnswer(req.at, w.now(), ok && req.byLeader)
	if w.heard.advance(req.at) {
		w.wakeClock()
	}
}
