package zklock

import (
	"errors"
	"fmt"
)

// ErrIncompatible reports a lock path that holds nodes of another recipe
// (another library's, another layout's, or another zklock primitive's) that
// would not see or order the caller's node: sharing the path would let two
// holders in, so zklock refuses to queue there, and leaves no node behind.
// The error names the path, the foreign node, whose recipe it is, and which
// zklock primitive would share the path.
var ErrIncompatible = errors.New("zklock: the lock path is used by another recipe")

// A recipe is what a node's name says about who made it.
type recipe struct {
	what  string // the libraries and recipes that name nodes this way
	share string // the zklock primitive that shares a path with them
}

var (
	mutexRecipe     = recipe{"a mutex (zklock's Mutex or Election, Curator's InterProcessMutex or LeaderSelector, go-zookeeper's zk.Lock)", "Mutex or Election"}
	kazooLockRecipe = recipe{"kazoo's Lock or WriteLock", "Mutex (kazoo given extra_lock_patterns), or RWMutex with KazooNames()"}
	rwRecipe        = recipe{"a read/write lock (zklock's RWMutex, Curator's InterProcessReadWriteLock)", "RWMutex"}
	kazooReadRecipe = recipe{"kazoo's ReadLock", "RWMutex with KazooNames()"}
	latchRecipe     = recipe{"a leader latch (Curator's LeaderLatch, zklock's Election with LatchNames)", "Election with LatchNames()"}
	leaseRecipe     = recipe{"a semaphore's lease (zklock's Semaphore, Curator's InterProcessSemaphoreV2)", "Semaphore"}
	layoutRecipe    = recipe{"a semaphore's layout (zklock's Semaphore, Curator's InterProcessSemaphoreV2 or InterProcessSemaphoreMutex)", "Semaphore"}
	unknownRecipe   = recipe{"no lock recipe zklock knows (kazoo's Semaphore names its leases so)", "none"}
)

// recipeOf says whose a child of a lock path is.
func recipeOf(name string) recipe {
	if name == "locks" || name == "leases" {
		return layoutRecipe
	}
	n, ok := parseNode(name)
	if !ok {
		return unknownRecipe
	}
	switch n.marker {
	case "-lock-":
		return mutexRecipe
	case "__lock__":
		return kazooLockRecipe
	case "__WRIT__", "__READ__":
		return rwRecipe
	case "__rlock__":
		return kazooReadRecipe
	case "-lease-":
		return leaseRecipe
	case "-latch-":
		return latchRecipe
	}
	return unknownRecipe
}

// joins lists, for each way zklock names its nodes, the recipes whose nodes
// order with them on one path, seen from both sides. kazoo's Lock sees
// zklock's mutex nodes only when given extra_lock_patterns, which the tree
// cannot show: its nodes stay joinable, as documented.
func joins(style nodeStyle) []recipe {
	switch {
	case style.kind == KindSemaphore:
		return []recipe{leaseRecipe}
	case style == latchStyle:
		return []recipe{latchRecipe}
	case style.kazoo:
		return []recipe{kazooLockRecipe, kazooReadRecipe}
	case style.kind == KindRead, style.kind == KindWrite:
		return []recipe{rwRecipe}
	}
	return []recipe{mutexRecipe, kazooLockRecipe}
}

// checkRecipe returns ErrIncompatible, naming the first node of children (a
// listing of path) that a node named in style must not share path with, or
// nil.
func checkRecipe(path string, style nodeStyle, children []string) error {
	ok := joins(style)
	for _, name := range children {
		r := recipeOf(name)
		if joinable(ok, r) {
			continue
		}
		return incompatible(path, name, r, style.kind)
	}
	return nil
}

func joinable(ok []recipe, r recipe) bool {
	for _, j := range ok {
		if j == r {
			return true
		}
	}
	return false
}

func incompatible(path, node string, r recipe, kind string) error {
	return fmt.Errorf("%w: %s holds %s, a node of %s, which would not see or order a zklock %s node; zklock primitive for this path: %s",
		ErrIncompatible, path, node, r.what, kind, r.share)
}

// checkLayout returns ErrIncompatible when a semaphore's path holds anything
// but the layout's two children (kazoo's Semaphore keeps its leases there).
func checkLayout(path string, children []string) error {
	for _, name := range children {
		if r := recipeOf(name); r != layoutRecipe {
			return incompatible(path, name, r, KindSemaphore)
		}
	}
	return nil
}
