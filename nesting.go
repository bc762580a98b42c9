package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/zklock/zklock/internal/lockpath"
)

// A lock path's children are its queue, so a lock path inside another one
// (P/x while P is a lock path) puts x into P's queue: P's waiters would wait
// on a stranger or fail with ErrIncompatible. The rule, and where it holds:
//
//   - a path segment named like a lock node is invalid (validatePath);
//   - a MultiLock whose members nest is refused without I/O
//     (NewMultiLock);
//   - making a lock path's missing parent refuses to put it inside a path
//     that is a lock path then (parentMaker.ensure, checkNotNested): one
//     read, only on the first use of a path;
//   - a path made inside P before P was first used (the nested one came
//     first), or in the same instant as P's first node: P's waiters refuse
//     to queue with ErrIncompatible, naming the child (readListing).

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

// checkNotNested is called once parent has gained the child made for
// lockPath: it refuses (and deletes the child, version 0: still empty) if
// parent is a lock path in use.
func (pm *parentMaker) checkNotNested(ctx context.Context, parent, child, lockPath string) error {
	if name := child[len(parent)+1:]; parent == "/" || name == lockpath.Turnstile || name == lockpath.Leases {
		return nil // the root is no lock path; a semaphore makes its layout inside its own path
	}
	outer := parent
	if !pm.isLockPath(ctx, parent) {
		// A semaphore's turnstile or leases path is a lock path even while
		// empty: its queue is the semaphore's.
		base := parent[strings.LastIndexByte(parent, '/')+1:]
		if base != lockpath.Turnstile && base != lockpath.Leases || !pm.isLockPath(ctx, parentOf(parent)) {
			return nil
		}
		outer = parentOf(parent)
	}
	c := pm.c
	// Still empty (version 0): a failed delete leaves it to the cleaner,
	// which was told of it if it is a container.
	_, _ = call(ctx, c, func() (struct{}, error) { return struct{}{}, c.conn.Delete(child, 0) })
	return fmt.Errorf("%w: %s would lie inside %s, a lock path in use (its children are its queue)", ErrNestedPath, lockPath, outer)
}

// isLockPath reads p's children: whether p is a lock path now. An
// unreadable p is no proof of one (the listing rule covers a late one).
func (pm *parentMaker) isLockPath(ctx context.Context, p string) bool {
	c := pm.c
	children, err := call(ctx, c, func() ([]string, error) {
		ch, _, err := c.conn.Children(p)
		return ch, err
	})
	return err == nil && lockpath.IsLockPath(children)
}

// parentOf returns p's parent ("/" for a top-level path).
func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "/"
}
