package wire

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
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
)

// chroot is the prefix of one client's connections.
type chroot struct {
	root    string      // "/app": valid lock path, no trailing slash
	invalid error       // wrapped in the refusal of a path ZooKeeper would reject (Config.InvalidPath)
	raw     atomic.Bool // paths go unchanged: only while Connect creates the chroot
}

func newChroot(root string, invalid error) *chroot {
	if invalid == nil {
		invalid = errInvalidPath
	}
	return &chroot{root: root, invalid: invalid}
}

// configNode is ZooKeeper's dynamic configuration, which ZooKeeper's own
// clients read at its absolute path whatever their chroot (getConfig).
const configNode = "/zookeeper/config"

// errInvalidPath stands in for Config.InvalidPath when none was given.
var errInvalidPath = errors.New("invalid path")

// Chroot returns the connect string's chroot, "" for none.
func (w *Tap) Chroot() string {
	if w.chroot == nil {
		return ""
	}
	return w.chroot.root
}

// RawPaths makes requests carry their paths unchanged (on) or under the
// chroot again (off): only while Connect creates the chroot itself, when
// nothing else is sent.
func (w *Tap) RawPaths(on bool) {
	if w.chroot != nil {
		w.chroot.raw.Store(on)
	}
}

// prepend puts the chroot in front of p. It refuses a path that is not a
// valid absolute one, as ZooKeeper's Java client does before adding its
// chroot: as a string, "-b" under /app would be /app-b, outside the chroot.
// seq says p is a sequential create's (which may end in "/").
func (r *chroot) prepend(p string, seq bool) (string, error) {
	if r.raw.Load() || p == configNode {
		return p, nil
	}
	if why := PathProblem(p, seq); why != "" {
		return "", fmt.Errorf("%w: %w %q: %s", errChrootRequest, r.invalid, p, why)
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
// length: the Tap refuses one that is not ZooKeeper's.
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
