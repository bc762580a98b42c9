package zklock

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"
)

// validatePath checks a lock path before any request is sent, so a bad path
// costs nothing and leaves nothing behind.
func validatePath(p string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidPath, p, why) }
	switch {
	case p == "/":
		return bad("the root cannot be a lock")
	case p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/"):
		return bad("/zookeeper is reserved for the server")
	}
	if why := zkPathProblem(p, false); why != "" {
		return bad(why)
	}
	return nil
}

// validateOpPath checks a path a request will carry, as ZooKeeper's client
// does (PathUtils): seq allows the trailing "/" of a sequential create.
func validateOpPath(p string, seq bool) error {
	if why := zkPathProblem(p, seq); why != "" {
		return fmt.Errorf("%w %q: %s", ErrInvalidPath, p, why)
	}
	return nil
}

// sequentialFlags reports whether a create's flags (ZooKeeper's CreateMode)
// make ZooKeeper append a sequence number to the path.
func sequentialFlags(flags int32) bool {
	return flags == zk.FlagSequence || flags == zk.FlagEphemeralSequential || flags == zk.FlagPersistentSequentialWithTTL
}

// zkPathProblem says why ZooKeeper would reject p, or "" if it would not.
// A chroot is put in front of a path as a string: only an absolute path
// without "." or ".." stays under it.
func zkPathProblem(p string, seq bool) string {
	switch {
	case p == "":
		return "empty"
	case p[0] != '/':
		return "must be absolute (start with /)"
	case p == "/":
		return ""
	case strings.HasSuffix(p, "/") && !seq:
		return "trailing slash"
	}
	segs := strings.Split(p[1:], "/")
	if seq {
		segs = segs[:len(segs)-1] // a sequential name may be empty: the number follows
	}
	for _, seg := range segs {
		switch seg {
		case "":
			return "empty segment (//)"
		case ".", "..":
			return `"." and ".." segments are not allowed`
		}
	}
	for _, r := range p {
		// The characters ZooKeeper's PathUtils rejects. It checks UTF-16 code
		// units, so every rune above U+FFFF (a surrogate pair) is rejected too.
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0xd800 && r <= 0xf8ff) || r >= 0xfff0 {
			return fmt.Sprintf("invalid character %U", r)
		}
	}
	return ""
}

// Lock node names. zklock writes Curator's protected form by default,
// "_c_<32 hex>-<marker><10 digits>", which go-zookeeper's zk.Lock also uses
// for its mutex, and it recognises every marker of Curator and kazoo, so
// contenders of all of them exclude each other on one path (see parseNode).
const (
	protectedPrefix = "_c_"
	seqDigits       = 10
)

// The markers a lock node name may carry before its sequence number, and
// whether a node with that marker only shares (a reader) or excludes.
var markers = []struct {
	marker string
	shared bool
}{
	{"-lock-", false},   // zklock's and Curator's mutex, go-zookeeper's zk.Lock
	{"__lock__", false}, // kazoo's Lock and WriteLock
	{"__WRIT__", false}, // Curator's InterProcessReadWriteLock writer
	{"__READ__", true},  // Curator's reader
	{"__rlock__", true}, // kazoo's ReadLock
	{"-lease-", false},  // Curator's InterProcessSemaphoreV2 lease
	{"-latch-", false},  // Curator's LeaderLatch, zklock's Election with LatchNames
}

// nodeStyle says how an Acquire names its node: the marker, and whether the
// name starts with Curator's protected prefix ("_c_<guid>-") or, as kazoo
// writes it, with the bare id ("<guid>").
type nodeStyle struct {
	marker string
	kazoo  bool
	kind   string // the primitive, as Metrics reports it
}

var (
	mutexStyle     = nodeStyle{marker: "lock-", kind: KindMutex}
	curatorRead    = nodeStyle{marker: "__READ__", kind: KindRead}
	curatorWrite   = nodeStyle{marker: "__WRIT__", kind: KindWrite}
	kazooRead      = nodeStyle{marker: "__rlock__", kazoo: true, kind: KindRead}
	kazooWrite     = nodeStyle{marker: "__lock__", kazoo: true, kind: KindWrite}
	semaphoreLease = nodeStyle{marker: "lease-", kind: KindSemaphore}
	latchStyle     = nodeStyle{marker: "latch-", kind: KindMutex}
)

// prefix is the name of a node before ZooKeeper appends its sequence.
func (s nodeStyle) prefix(guid string) string {
	if s.kazoo {
		return guid + s.marker
	}
	return protectedPrefix + guid + "-" + s.marker
}

// lockNode is one contender found in a lock path.
type lockNode struct {
	name   string
	seq    int64
	shared bool   // a reader: it excludes only writers
	marker string // the marker before the sequence, as in markers
}

// parseSeq returns the sequence number of a lock node name, or false for a
// child that is not a lock node.
func parseSeq(name string) (int64, bool) {
	n, ok := parseNode(name)
	return n.seq, ok
}

// parseNode reads a lock node name: the sequence after its marker, and
// whether the marker is a reader's. A child that is not a lock node gives
// false (foreign children are ignored, never fatal). The sequence is the 10
// digits that end the name, right after a marker, read as an integer: names
// must never be compared as strings (the GUID prefix would scramble order).
// It looks only at the end of the name: every waiter parses the whole queue
// on every wake-up, so this is the hot loop of a long queue.
func parseNode(name string) (lockNode, bool) {
	digits := len(name) - seqDigits
	if digits > 0 && name[digits-1] == '-' && !endsWithMarker(name[:digits]) {
		digits-- // ZooKeeper's counter wrapped past 2^31: "-2147483648"
	}
	if digits < 0 {
		return lockNode{}, false
	}
	at := -1
	var shared bool
	var marker string
	for _, mk := range markers {
		if strings.HasSuffix(name[:digits], mk.marker) {
			at, shared, marker = digits, mk.shared, mk.marker
			break
		}
	}
	if at < 0 {
		return lockNode{}, false
	}
	// ZooKeeper's counter is a signed 32-bit int printed with %010d: after
	// 2^31 nodes it wraps to "-2147483648". Reading it back as unsigned keeps
	// the wrapped names after the ones before the wrap.
	n, err := strconv.ParseInt(name[at:], 10, 32)
	if err != nil || name[at] == '+' {
		return lockNode{}, false
	}
	return lockNode{name: name, seq: int64(uint32(int32(n))), shared: shared, marker: marker}, true
}

// endsWithMarker reports whether s ends with one of the markers.
func endsWithMarker(s string) bool {
	for _, mk := range markers {
		if strings.HasSuffix(s, mk.marker) {
			return true
		}
	}
	return false
}

// sortedLockNodes keeps the lock nodes among children, in queue order.
func sortedLockNodes(children []string) []lockNode {
	nodes := make([]lockNode, 0, len(children))
	for _, c := range children {
		if n, ok := parseNode(c); ok {
			nodes = append(nodes, n)
		}
	}
	slices.SortFunc(nodes, func(a, b lockNode) int { return cmp.Compare(a.seq, b.seq) })
	return nodes
}

// ancestors lists the proper ancestors of p, shortest first ("/a", "/a/b" for "/a/b/c").
func ancestors(p string) []string {
	var out []string
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}
