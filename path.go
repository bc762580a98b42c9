package zklock

import (
	"fmt"
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
