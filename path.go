package zklock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/zklock/zklock/internal/lockpath"
	"github.com/zklock/zklock/internal/wire"
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
	if why := wire.PathProblem(p, false); why != "" {
		return bad(why)
	}
	if seg := nestedSegment(p); seg != "" {
		return bad(fmt.Sprintf("segment %q is named like a lock node: its parent would take it for a queue member", seg))
	}
	return nil
}

// validateOpPath checks a path a request will carry, as ZooKeeper's client
// does (PathUtils): seq allows the trailing "/" of a sequential create.
func validateOpPath(p string, seq bool) error {
	if why := wire.PathProblem(p, seq); why != "" {
		return fmt.Errorf("%w %q: %s", ErrInvalidPath, p, why)
	}
	return nil
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

// ErrNestedPath reports a lock path that would lie inside another lock path
// (or contain one): the error names both. Nothing was left behind.
var ErrNestedPath = errors.New("zklock: a lock path cannot lie inside another lock path")

// nestedSegment reports a segment of p named like a lock node, which a lock
// path must not have: its parent would take it for a queue member.
func nestedSegment(p string) string {
	for _, seg := range strings.Split(p[1:], "/") {
		if _, ok := lockpath.Parse(seg); ok {
			return seg
		}
	}
	return ""
}

// checkNestedSet refuses a set of lock paths one of which lies inside
// another (sorted: an ancestor comes right before its descendants).
func checkNestedSet(sorted []string) error {
	for i := 1; i < len(sorted); i++ {
		if strings.HasPrefix(sorted[i], sorted[i-1]+"/") {
			return fmt.Errorf("%w: %s lies inside %s", ErrNestedPath, sorted[i], sorted[i-1])
		}
	}
	return nil
}
