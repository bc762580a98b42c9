// Package lockpath holds the rules for what lives in a lock path: the names
// of lock nodes (the ways zklock, Curator, kazoo and go-zookeeper write them),
// their order, whose turn it is, which recipes may share a path, a
// semaphore's layout, and the kinds Metrics reports. It does no I/O. The
// zklock package and its CLI both read names through it, so that they cannot
// disagree about what a lock node is.
package lockpath

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// The kinds of primitive, as Metrics reports them (zklock re-exports them).
const (
	KindMutex     = "mutex"
	KindRead      = "read"
	KindWrite     = "write"
	KindSemaphore = "semaphore"
)

// A semaphore's layout, Curator's InterProcessSemaphoreV2: its path has the
// children Turnstile (a mutex queue) and Leases (the leases' queue).
const (
	Turnstile = "locks"
	Leases    = "leases"
)

// Lock node names. zklock writes Curator's protected form by default,
// "_c_<32 hex>-<marker><10 digits>", which go-zookeeper's zk.Lock also uses
// for its mutex, and it recognises every marker of Curator and kazoo, so
// contenders of all of them exclude each other on one path (see Parse).
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

// Style says how an Acquire names its node: the marker, and whether the
// name starts with Curator's protected prefix ("_c_<guid>-") or, as kazoo
// writes it, with the bare id ("<guid>").
type Style struct {
	marker string
	kazoo  bool
	Kind   string // the primitive, as Metrics reports it
}

// The styles zklock's primitives name their nodes in.
var (
	MutexStyle     = Style{marker: "lock-", Kind: KindMutex}
	CuratorRead    = Style{marker: "__READ__", Kind: KindRead}
	CuratorWrite   = Style{marker: "__WRIT__", Kind: KindWrite}
	KazooRead      = Style{marker: "__rlock__", kazoo: true, Kind: KindRead}
	KazooWrite     = Style{marker: "__lock__", kazoo: true, Kind: KindWrite}
	SemaphoreLease = Style{marker: "lease-", Kind: KindSemaphore}
	LatchStyle     = Style{marker: "latch-", Kind: KindMutex}
)

// Prefix is the name of a node before ZooKeeper appends its sequence.
func (s Style) Prefix(guid string) string {
	if s.kazoo {
		return guid + s.marker
	}
	return protectedPrefix + guid + "-" + s.marker
}

// Downgrades reports whether a writer named in s can become a reader at its
// own place, as Curator 5.5 and later downgrade InterProcessReadWriteLock's
// writer: only Curator's writer names (kazoo's WriteLock has no downgrade,
// and its readers would not know the reader's name).
func (s Style) Downgrades() bool { return s == CuratorWrite }

// AtPlaceOf names a plain (not sequential) node in style s, carrying guid,
// that sorts at the place of the lock node called at: it ends with at's
// sequence, as Curator 5.5 names the reader a write lock is downgraded to
// ("_c_<guid>-__READ__" and the writer's 10 digits). false if at is not a
// lock node.
func (s Style) AtPlaceOf(guid, at string) (string, bool) {
	n, i, ok := parse(at)
	if !ok {
		return "", false
	}
	return s.Prefix(guid) + at[i+len(n.Marker):], true
}

// Node is one contender found in a lock path.
type Node struct {
	Name   string
	Seq    int64
	Shared bool   // a reader: it excludes only writers
	Marker string // the marker before the sequence, as in markers
}

// Seq returns the sequence number of a lock node name, or false for a
// child that is not a lock node.
func Seq(name string) (int64, bool) {
	n, ok := Parse(name)
	return n.Seq, ok
}

// Parse reads a lock node name: the sequence after its marker, and
// whether the marker is a reader's. A child that is not a lock node gives
// false (foreign children are ignored, never fatal). The sequence is the 10
// digits that end the name, right after a marker, read as an integer: names
// must never be compared as strings (the GUID prefix would scramble order).
// It looks only at the end of the name: every waiter parses the whole queue
// on every wake-up, so this is the hot loop of a long queue.
func Parse(name string) (Node, bool) {
	n, _, ok := parse(name)
	return n, ok
}

// parse is Parse, also returning where the marker starts in name.
func parse(name string) (Node, int, bool) {
	digits := len(name) - seqDigits
	if digits > 0 && name[digits-1] == '-' && !endsWithMarker(name[:digits]) {
		digits-- // ZooKeeper's counter wrapped past 2^31: "-2147483648"
	}
	if digits < 0 {
		return Node{}, 0, false
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
		return Node{}, 0, false
	}
	// ZooKeeper's counter is a signed 32-bit int printed with %010d: after
	// 2^31 nodes it wraps to "-2147483648". Reading it back as unsigned keeps
	// the wrapped names after the ones before the wrap.
	n, err := strconv.ParseInt(name[at:], 10, 32)
	if err != nil || name[at] == '+' {
		return Node{}, 0, false
	}
	return Node{Name: name, Seq: int64(uint32(int32(n))), Shared: shared, Marker: marker}, at - len(marker), true
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

// Sorted keeps the lock nodes among children, in queue order.
func Sorted(children []string) []Node {
	nodes := make([]Node, 0, len(children))
	for _, c := range children {
		if n, ok := Parse(c); ok {
			nodes = append(nodes, n)
		}
	}
	sortBySeq(nodes)
	return nodes
}

// sortBySeq puts nodes in queue order.
func sortBySeq(nodes []Node) {
	slices.SortFunc(nodes, func(a, b Node) int { return cmp.Compare(a.Seq, b.Seq) })
}

// Count returns how many of children are lock nodes.
func Count(children []string) int {
	n := 0
	for _, c := range children {
		if _, ok := Parse(c); ok {
			n++
		}
	}
	return n
}

// IsLockPath reports whether a node with these children is a lock path: it
// has a lock node among them, or it is a semaphore's path (it has Leases).
func IsLockPath(children []string) bool {
	for _, c := range children {
		if _, ok := Parse(c); ok || c == Leases {
			return true
		}
	}
	return false
}

// Short is the name of the lock node at path node, for people: without the
// lock path and, in the protected form of zklock, Curator and go-zookeeper
// ("_c_<guid>-lock-<seq>"), without the GUID ("lock-<seq>"). Other names are
// given whole.
func Short(node string) string {
	name := node[strings.LastIndexByte(node, '/')+1:]
	_, at, ok := parse(name)
	if !ok || !strings.HasPrefix(name, protectedPrefix) {
		return name
	}
	return strings.TrimPrefix(name[at:], "-")
}
