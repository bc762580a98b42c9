package zklock

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// validatePath checks a lock path before any request is sent, so a bad path
// costs nothing and leaves nothing behind.
func validatePath(p string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidPath, p, why) }
	switch {
	case p == "":
		return bad("empty")
	case p[0] != '/':
		return bad("must be absolute (start with /)")
	case p == "/":
		return bad("the root cannot be a lock")
	case strings.HasSuffix(p, "/"):
		return bad("trailing slash")
	case p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/"):
		return bad("/zookeeper is reserved for the server")
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return bad("empty segment (//)")
		case ".", "..":
			return bad(`"." and ".." segments are not allowed`)
		}
	}
	for _, r := range p {
		// The characters ZooKeeper's PathUtils rejects. It checks UTF-16 code
		// units, so every rune above U+FFFF (a surrogate pair) is rejected too.
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0xd800 && r <= 0xf8ff) || r >= 0xfff0 {
			return bad(fmt.Sprintf("invalid character %U", r))
		}
	}
	return nil
}

// Lock node names. zklock writes Curator's protected form,
// "_c_<32 hex>-lock-<10 digits>", which go-zookeeper's zk.Lock also uses, and
// it recognises kazoo's "<id>__lock__<10 digits>" so all of them exclude each
// other on one path.
const (
	protectedPrefix = "_c_"
	lockMarker      = "-lock-"
	kazooMarker     = "__lock__"
	seqDigits       = 10
)

// lockNode is one contender found in a lock path.
type lockNode struct {
	name string
	seq  int64
}

// parseSeq returns the sequence number of a lock node name, or false for a
// child that is not a lock node (foreign children are ignored, never fatal).
// The sequence is the 10 digits after the marker, read as an integer: names
// must never be compared as strings (the GUID prefix would scramble order).
func parseSeq(name string) (int64, bool) {
	i := strings.LastIndex(name, lockMarker)
	m := len(lockMarker)
	if j := strings.LastIndex(name, kazooMarker); j > i {
		i, m = j, len(kazooMarker)
	}
	if i < 0 {
		return 0, false
	}
	digits := name[i+m:]
	if len(digits) != seqDigits && !(len(digits) == seqDigits+1 && digits[0] == '-') {
		return 0, false
	}
	// ZooKeeper's counter is a signed 32-bit int printed with %010d: after
	// 2^31 nodes it wraps to "-2147483648". Reading it back as unsigned keeps
	// the wrapped names after the ones before the wrap.
	n, err := strconv.ParseInt(digits, 10, 32)
	if err != nil {
		return 0, false
	}
	return int64(uint32(int32(n))), true
}

// sortedLockNodes keeps the lock nodes among children, in queue order.
func sortedLockNodes(children []string) []lockNode {
	nodes := make([]lockNode, 0, len(children))
	for _, c := range children {
		if seq, ok := parseSeq(c); ok {
			nodes = append(nodes, lockNode{name: c, seq: seq})
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
