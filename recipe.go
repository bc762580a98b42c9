package zklock

import (
	"errors"
	"fmt"

	"github.com/zklock/zklock/internal/lockpath"
)

// ErrIncompatible reports a lock path that holds nodes of another recipe
// (another library's, another layout's, or another zklock primitive's) that
// would not see or order the caller's node: sharing the path would let two
// holders in, so zklock refuses to queue there, and leaves no node behind.
// The error names the path, the foreign node, whose recipe it is, and which
// zklock primitive would share the path.
var ErrIncompatible = errors.New("zklock: the lock path is used by another recipe")

// readListing parses a listing of q's path once: its lock nodes in queue
// order, or ErrIncompatible when a peer's node shares the path (checked on
// every listing: a peer may come later).
func (q *queueNode) readListing(children []string) ([]lockpath.Node, error) {
	l := q.style.Read(children)
	if l.Foreign != "" {
		return nil, incompatible(q.path, l.Foreign, l.Recipe, q.style.Kind)
	}
	return l.Nodes, nil
}

func incompatible(path, node string, r lockpath.Recipe, kind string) error {
	return fmt.Errorf("%w: %s holds %s, a node of %s, which would not see or order a zklock %s node; zklock primitive for this path: %s",
		ErrIncompatible, path, node, r.What, kind, r.Share)
}

// checkLayout returns ErrIncompatible when a semaphore's path holds anything
// but the layout's two children (kazoo's Semaphore keeps its leases there).
func checkLayout(path string, children []string) error {
	if name, r, ok := lockpath.ForeignToLayout(children); ok {
		return incompatible(path, name, r, KindSemaphore)
	}
	return nil
}
