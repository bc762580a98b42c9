package wire

import (
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
)

// SequentialFlags reports whether a create's flags (ZooKeeper's CreateMode)
// make ZooKeeper append a sequence number to the path.
func SequentialFlags(flags int32) bool {
	return flags == zk.FlagSequence || flags == zk.FlagEphemeralSequential || flags == zk.FlagPersistentSequentialWithTTL
}

// PathProblem says why ZooKeeper's client (PathUtils) would reject p, or ""
// if it would not; seq allows the trailing "/" of a sequential create. A
// chroot is put in front of a path as a string: only an absolute path
// without "." or ".." stays under it.
func PathProblem(p string, seq bool) string {
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
