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
// replace applies to zklock's own builds only.) The rewriting of each
// packet is in chrootrewrite.go, the jute encoding it reads and writes in
// jute.go.

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

// chrootMaxFrame bounds the frames nextFrame reads whole to rewrite them; a
// larger one passes through unchanged.
const chrootMaxFrame = 8 << 20

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
