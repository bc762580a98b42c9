package zklock

// This file gives Connect ZooKeeper's chroot ("host:2181/app"), which
// go-zookeeper lacks, where ZooKeeper's Java client has it (ClientCnxn):
// between go-zookeeper and the socket. Every path a request carries gets the
// chroot in front, once checked as the Java client checks it (as a string,
// "-b" under /app would be /app-b: an invalid path is refused); the paths a
// reply carries (a create's name, a sync's path, the creates of a multi) and
// every watch event's path lose it. go-zookeeper, zklock and a caller of
// Client.Conn see the tree under the chroot as the whole tree. (A vendored
// go-zookeeper patch would not reach programs that import zklock: go.mod's
// replace applies to zklock's own builds only.)

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-zookeeper/zk"
)

// ZooKeeper opcodes whose requests or replies carry paths.
const (
	zkOpCreate          = 1
	zkOpDelete          = 2
	zkOpExists          = 3
	zkOpGetData         = 4
	zkOpSetData         = 5
	zkOpGetACL          = 6
	zkOpSetACL          = 7
	zkOpGetChildren     = 8
	zkOpSync            = 9
	zkOpGetChildren2    = 12
	zkOpCheck           = 13
	zkOpMulti           = 14
	zkOpCreate2         = 15
	zkOpCheckWatches    = 17
	zkOpRemoveWatches   = 18
	zkOpCreateContainer = 19
	zkOpDeleteContainer = 20
	zkOpCreateTTL       = 21
	zkOpMultiRead       = 22
	zkOpSetWatches      = 101
	zkOpGetEphemerals   = 103
	zkOpGetAllChildren  = 104
	zkOpSetWatches2     = 105
	zkOpAddWatch        = 106
	zkOpError           = -1
	zkStatLen           = 68 // a Stat as jute writes it: 6 int64 and 5 int32
	zkWatchXid          = -1 // the xid of a watch event
	chrootMaxFrame      = 8 << 20
)

// chroot is the prefix of one client's connections.
type chroot struct {
	root string      // "/app": valid lock path, no trailing slash
	raw  atomic.Bool // paths go unchanged: only while Connect creates the chroot
}

// prepend puts the chroot in front of p. It refuses a path that is not a
// valid absolute one, as ZooKeeper's Java client does before adding its
// chroot: as a string, "-b" under /app would be /app-b, outside the chroot.
// seq says p is a sequential create's (which may end in "/").
func (r *chroot) prepend(p string, seq bool) (string, error) {
	if r.raw.Load() {
		return p, nil
	}
	if err := validateOpPath(p, seq); err != nil {
		return "", fmt.Errorf("%w: %w", errChrootRequest, err)
	}
	if p == "/" {
		return r.root, nil
	}
	return r.root + p, nil
}

// strip turns a server path into the client's; a path outside the chroot
// (which the server does not send) stays as it is, as in the Java client.
func (r *chroot) strip(p string) string {
	switch {
	case p == r.root:
		return "/"
	case strings.HasPrefix(p, r.root+"/"):
		return p[len(r.root):]
	}
	return p
}

// chrootConn rewrites the frames of one connection. go-zookeeper writes one
// packet per Write (the first is the connect request, which carries no path)
// and reads replies from one goroutine.
type chrootConn struct {
	net.Conn
	r *chroot

	mu      sync.Mutex
	started bool            // the connect request went out
	pending map[int32]int32 // xid → opcode, for requests whose reply carries paths

	// Read side, used by go-zookeeper's receive goroutine only.
	framesIn int    // frames begun
	out      []byte // rewritten or header bytes not yet returned
	left     int64  // bytes of the current frame to pass through unread
}

func newChrootConn(nc net.Conn, r *chroot) *chrootConn {
	return &chrootConn{Conn: nc, r: r, pending: make(map[int32]int32)}
}

// errChrootRequest refuses a request chrootConn cannot rewrite (an unknown
// op, a malformed packet, a path that is not a valid absolute one): sent as
// it is, it would reach outside the chroot. go-zookeeper returns the error
// to the caller and, as after any failed write, reconnects.
var errChrootRequest = errors.New("zklock: chroot: cannot rewrite the request's paths")

func (c *chrootConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if !c.started {
		c.started = true
		c.mu.Unlock()
		return c.Conn.Write(p)
	}
	c.mu.Unlock()
	q, op, err := c.r.request(p)
	if err != nil {
		return 0, err
	}
	if replyHasPaths(op) && len(p) >= 8 {
		c.mu.Lock()
		c.pending[int32(binary.BigEndian.Uint32(p[4:8]))] = op
		c.mu.Unlock()
	}
	if _, err := c.Conn.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}

func replyHasPaths(op int32) bool {
	switch op {
	case zkOpCreate, zkOpCreate2, zkOpCreateContainer, zkOpCreateTTL, zkOpSync, zkOpMulti, zkOpGetEphemerals:
		return true
	}
	return false
}

func (c *chrootConn) Read(p []byte) (int, error) {
	if len(c.out) == 0 && c.left == 0 {
		if err := c.nextFrame(); err != nil {
			return 0, err
		}
	}
	if len(c.out) > 0 {
		n := copy(p, c.out)
		c.out = c.out[n:]
		return n, nil
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= int64(n)
	return n, err
}

// nextFrame reads the start of the next frame: a reply with paths whole,
// rewritten into c.out; any other only as far as its xid, the rest passed
// through. The first frame (the connect response) passes whatever its
// length: wire refuses one that is not ZooKeeper's.
func (c *chrootConn) nextFrame() error {
	var h [8]byte
	if _, err := io.ReadFull(c.Conn, h[:4]); err != nil {
		return err
	}
	n := int64(binary.BigEndian.Uint32(h[:4]))
	c.framesIn++
	if c.framesIn == 1 || n < 4 {
		c.out, c.left = h[:4], n
		return nil
	}
	if _, err := io.ReadFull(c.Conn, h[4:8]); err != nil {
		return err
	}
	xid := int32(binary.BigEndian.Uint32(h[4:8]))
	op := int32(0)
	if xid != zkWatchXid {
		c.mu.Lock()
		op = c.pending[xid]
		delete(c.pending, xid)
		c.mu.Unlock()
	}
	if (xid != zkWatchXid && op == 0) || n > chrootMaxFrame {
		c.out, c.left = h[:8], n-4
		return nil
	}
	b := make([]byte, 4+n)
	copy(b, h[:8])
	if _, err := io.ReadFull(c.Conn, b[8:]); err != nil {
		return err
	}
	c.out, c.left = c.r.reply(b, xid, op), 0
	return nil
}

// request rewrites one request packet, [length][xid][opcode][body]; the
// packet comes back unchanged if it carries no path.
func (r *chroot) request(p []byte) ([]byte, int32, error) {
	if len(p) < 12 {
		return p, 0, nil // a ping or close has a header only
	}
	op := int32(binary.BigEndian.Uint32(p[8:12]))
	in := &jreader{b: p, off: 12}
	out := jwriter{b: make([]byte, 12, len(p)+64)}
	copy(out.b, p[:12])
	var err error
	switch op {
	case zkOpCreate, zkOpDelete, zkOpExists, zkOpGetData, zkOpSetData, zkOpGetACL, zkOpSetACL,
		zkOpGetChildren, zkOpSync, zkOpGetChildren2, zkOpCheck, zkOpCreate2, zkOpCheckWatches,
		zkOpRemoveWatches, zkOpCreateContainer, zkOpDeleteContainer, zkOpCreateTTL,
		zkOpGetEphemerals, zkOpGetAllChildren, zkOpAddWatch:
		err = r.path(in, &out, isCreate(op) && createSeq(*in))
	case zkOpMulti, zkOpMultiRead:
		err = r.multi(in, &out)
	case zkOpSetWatches, zkOpSetWatches2:
		out.b = append(out.b, in.next(8)...) // relative zxid
		lists := 3
		if op == zkOpSetWatches2 {
			lists = 5
		}
		for range lists {
			k := in.int32()
			out.int32(k)
			for i := int32(0); i < k && !in.bad && err == nil; i++ {
				err = r.path(in, &out, false)
			}
		}
	default:
		return p, op, nil
	}
	if err != nil {
		return nil, op, err
	}
	if in.bad {
		return nil, op, fmt.Errorf("%w (opcode %d: malformed)", errChrootRequest, op)
	}
	out.b = append(out.b, in.b[in.off:]...)
	binary.BigEndian.PutUint32(out.b[:4], uint32(len(out.b)-4))
	return out.b, op, nil
}

// multi rewrites the ops of a multi.
func (r *chroot) multi(in *jreader, out *jwriter) error {
	for !in.bad {
		typ, done, ok := multiHeader(in, out)
		if done || !ok {
			return nil
		}
		if err := r.multiOp(in, out, typ); err != nil {
			return err
		}
	}
	return nil
}

// path copies one path from in to out with the chroot in front (a short
// packet is left to the caller, which sees in.bad).
func (r *chroot) path(in *jreader, out *jwriter, seq bool) error {
	s, ok := in.str()
	switch {
	case in.bad:
		return nil
	case !ok:
		return fmt.Errorf("%w: a null path", errChrootRequest)
	}
	q, err := r.prepend(s, seq)
	if err != nil {
		return err
	}
	out.str(q)
	return nil
}

func isCreate(op int32) bool {
	switch op {
	case zkOpCreate, zkOpCreate2, zkOpCreateContainer, zkOpCreateTTL:
		return true
	}
	return false
}

// skipACL skips an ACL list: a count, then perms, scheme and id each.
func skipACL(in *jreader) {
	k := in.int32()
	for i := int32(0); i < k && !in.bad; i++ {
		in.skip(4) // perms
		in.buf()   // scheme
		in.buf()   // id
	}
}

// createSeq reads ahead, on a copy of the reader, whether the create whose
// path starts at in (path, data, ACL, flags) is a sequential one.
func createSeq(in jreader) bool {
	in.buf() // path
	in.buf() // data
	skipACL(&in)
	return sequentialFlags(in.int32())
}

// multiOp rewrites one operation of a multi; an unknown one is refused.
func (r *chroot) multiOp(in *jreader, out *jwriter, typ int32) error {
	switch typ {
	case zkOpCreate, zkOpCreate2, zkOpCreateContainer, zkOpCreateTTL, zkOpDelete, zkOpCheck,
		zkOpSetData, zkOpGetData, zkOpGetChildren:
	default:
		return fmt.Errorf("%w (multi op %d)", errChrootRequest, typ)
	}
	if err := r.path(in, out, isCreate(typ) && createSeq(*in)); err != nil {
		return err
	}
	start := in.off
	switch typ {
	case zkOpCreate, zkOpCreate2, zkOpCreateContainer, zkOpCreateTTL:
		in.buf() // data
		skipACL(in)
		in.skip(4) // flags
		if typ == zkOpCreateTTL {
			in.skip(8)
		}
	case zkOpDelete, zkOpCheck:
		in.skip(4) // version
	case zkOpSetData:
		in.buf()
		in.skip(4)
	case zkOpGetData, zkOpGetChildren:
		in.skip(1) // watch
	}
	if !in.bad {
		out.b = append(out.b, in.b[start:in.off]...)
	}
	return nil
}

// reply rewrites a whole reply frame [length][xid][zxid][err][body] of a
// request with paths, or a watch event; a frame it cannot parse comes back
// unchanged (go-zookeeper then reports it).
func (r *chroot) reply(b []byte, xid, op int32) []byte {
	if len(b) < 20 {
		return b
	}
	in := &jreader{b: b, off: 20}
	out := jwriter{b: make([]byte, 20, len(b))}
	copy(out.b, b[:20])
	if xid == zkWatchXid {
		// A watch event: type, state, path (after a header of xid, zxid, err).
		out.b = append(out.b, in.next(8)...)
		r.stripPath(in, &out)
	} else {
		switch op {
		case zkOpCreate, zkOpCreate2, zkOpCreateContainer, zkOpCreateTTL, zkOpSync:
			if len(b) == 20 {
				return b // an error reply has no body
			}
			r.stripPath(in, &out)
		case zkOpGetEphemerals:
			if len(b) == 20 {
				return b
			}
			k := in.int32()
			out.int32(k)
			for i := int32(0); i < k && !in.bad; i++ {
				r.stripPath(in, &out)
			}
		case zkOpMulti:
			for !in.bad {
				typ, done, ok := multiHeader(in, &out)
				if done || !ok {
					break
				}
				start := in.off
				switch typ {
				case zkOpCreate:
					r.stripPath(in, &out)
				case zkOpCreate2, zkOpCreateContainer, zkOpCreateTTL:
					r.stripPath(in, &out)
					start = in.off
					in.skip(zkStatLen)
				case zkOpSetData:
					in.skip(zkStatLen)
				case zkOpDelete, zkOpCheck:
				case zkOpError:
					in.skip(4)
				default:
					return b
				}
				if typ != zkOpCreate {
					out.b = append(out.b, in.b[start:in.off]...)
				}
			}
		}
	}
	if in.bad {
		return b
	}
	out.b = append(out.b, in.b[in.off:]...)
	binary.BigEndian.PutUint32(out.b[:4], uint32(len(out.b)-4))
	return out.b
}

// multiHeader copies a multi's op header (type, done, err) and returns the
// type and done.
func multiHeader(in *jreader, out *jwriter) (typ int32, done, ok bool) {
	h := in.next(9)
	if h == nil {
		return 0, false, false
	}
	out.b = append(out.b, h...)
	return int32(binary.BigEndian.Uint32(h[:4])), h[4] != 0, true
}

func (r *chroot) stripPath(in *jreader, out *jwriter) {
	s, ok := in.str()
	if !ok {
		out.int32(-1)
		return
	}
	out.str(r.strip(s))
}

// jreader reads jute's big-endian encoding; a short buffer sets bad.
type jreader struct {
	b   []byte
	off int
	bad bool
}

func (r *jreader) next(n int) []byte {
	if r.bad || n < 0 || len(r.b)-r.off < n {
		r.bad = true
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *jreader) skip(n int) { r.next(n) }

func (r *jreader) int32() int32 {
	p := r.next(4)
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

// buf skips a length-prefixed buffer or string (-1: null).
func (r *jreader) buf() {
	if n := r.int32(); n > 0 {
		r.skip(int(n))
	}
}

// str reads a string; ok is false for null (or on error).
func (r *jreader) str() (string, bool) {
	n := r.int32()
	if n < 0 || r.bad {
		return "", false
	}
	p := r.next(int(n))
	return string(p), p != nil
}

type jwriter struct{ b []byte }

func (w *jwriter) int32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }

func (w *jwriter) str(s string) {
	w.int32(int32(len(s)))
	w.b = append(w.b, s...)
}

func newChroot(root string) *chroot { return &chroot{root: root} }

// ensureChroot checks, once per Connect with a chroot, that the chroot node
// exists, and creates it and its missing ancestors if not (persistent nodes,
// with the client's ACL), as lock paths' parents are created: otherwise
// every create under it would fail with "no node".
func (c *Client) ensureChroot(ctx context.Context) error {
	r := c.wire.chroot
	if r == nil {
		return nil
	}
	ok, err := call(ctx, c, func() (bool, error) {
		ok, _, err := c.conn.Exists("/") // the chroot itself
		return ok, err
	})
	if err != nil {
		return fmt.Errorf("zklock: checking the chroot %s: %w", r.root, err)
	}
	if ok {
		return nil
	}
	// Nothing else is sent before Connect returns: the raw paths are ours.
	r.raw.Store(true)
	defer r.raw.Store(false)
	for _, p := range append(ancestors(r.root), r.root) {
		_, err := call(ctx, c, func() (string, error) { return c.conn.Create(p, nil, zk.FlagPersistent, c.opts.acl) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zklock: the chroot %s does not exist and creating %s failed: %w", r.root, p, err)
		}
	}
	return nil
}
