package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

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
//     read of the parent (two inside a path named locks or leases), each
//     time a path's first missing node is made: its first use, or its first
//     after the cleaner removed it;
//   - a path made inside P before P was first used (the nested one came
//     first), or in the same instant as P's first node: P's waiters refuse
//     to queue with ErrIncompatible, naming the child (readListing).

// checkNotNested is called once parent has gained the child made (or
// perhaps made: a create whose reply was lost) for lockPath: it refuses,
// and deletes the child, if that puts it inside a lock path in use: parent
// has lock nodes, or is a semaphore's turnstile or leases path (its
// grandparent has exactly those two children). A parent it cannot read
// refuses too: the rule must not pass on a cut connection. A path made
// beside a semaphore's layout (S/x) is not refused here: the semaphore's
// callers refuse S with ErrIncompatible, naming x (checkLayout).
func (pm *parentMaker) checkNotNested(ctx context.Context, parent, child, lockPath string) error {
	if parent == "/" {
		return nil // the root is no lock path
	}
	outer, err := pm.enclosingLockPath(ctx, parent, child[len(parent)+1:])
	if err == nil && outer == "" {
		return nil
	}
	why := fmt.Errorf("%w: %s would lie inside %s, a lock path in use (its children are its queue)", ErrNestedPath, lockPath, outer)
	if err != nil {
		why = fmt.Errorf("zklock: cannot tell whether %s lies inside a lock path in use: %w", lockPath, err)
	}
	if derr := pm.removeMade(ctx, child); derr != nil {
		return fmt.Errorf("%w; %s stays (its delete failed: %w)", why, child, derr)
	}
	return why
}

// enclosingLockPath returns the lock path in use that a child name of
// parent would lie inside, or "".
func (pm *parentMaker) enclosingLockPath(ctx context.Context, parent, name string) (string, error) {
	siblings, err := pm.children(ctx, parent)
	switch {
	case err != nil:
		return "", err
	case hasLockNode(siblings):
		return parent, nil
	}
	// An empty turnstile or leases path of a semaphore is its queue too; a
	// directory that merely has that name holds other children.
	base, grand := parent[strings.LastIndexByte(parent, '/')+1:], parentOf(parent)
	if base != lockpath.Turnstile && base != lockpath.Leases || grand == "/" || len(siblings) > 1 {
		return "", nil
	}
	layout, err := pm.children(ctx, grand)
	if err != nil || !isLayout(layout) {
		return "", err
	}
	return grand, nil // inside a semaphore's turnstile or leases path
}

// children lists p, retrying a dropped connection within ctx.
func (pm *parentMaker) children(ctx context.Context, p string) ([]string, error) {
	c := pm.c
	r := c.retrier(ctx, nil)
	for {
		ch, err := call(ctx, c, func() ([]string, error) {
			ch, _, err := c.conn.Children(p)
			return ch, err
		})
		if classify(err) != errConnection {
			return ch, err
		}
		if werr := r.wait(); werr != nil {
			return nil, err
		}
	}
}

// removeMade deletes a child this call made and found nested, while it is
// still empty (version 0), retrying a dropped connection for the cleanup
// timeout. A child that is gone, or that someone gave a child or data
// meanwhile, is left to its users.
func (pm *parentMaker) removeMade(ctx context.Context, child string) error {
	c := pm.c
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.cleanupTimeout)
	defer cancel()
	r := c.retrier(ctx, nil)
	for {
		_, err := call(ctx, c, func() (struct{}, error) { return struct{}{}, c.conn.Delete(child, 0) })
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrNotEmpty), errors.Is(err, zk.ErrBadVersion):
			return nil
		case classify(err) != errConnection:
			return err
		}
		if werr := r.wait(); werr != nil {
			return err
		}
	}
}

// hasLockNode reports whether children hold a lock node: a queue.
func hasLockNode(children []string) bool {
	for _, name := range children {
		if _, ok := lockpath.Parse(name); ok {
			return true
		}
	}
	return false
}

// isLayout reports whether children are a semaphore's layout: its turnstile
// and leases paths and nothing else.
func isLayout(children []string) bool {
	return len(children) == 2 && slices.Contains(children, lockpath.Turnstile) && slices.Contains(children, lockpath.Leases)
}

// parentOf returns p's parent ("/" for a top-level path).
func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "/"
}
