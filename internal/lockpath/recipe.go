package lockpath

// A Recipe is what a node's name says about who made it.
type Recipe struct {
	What  string // the libraries and recipes that name nodes this way
	Share string // the zklock primitive that shares a path with them
}

var (
	mutexRecipe     = Recipe{"a mutex (zklock's Mutex or Election, Curator's InterProcessMutex or LeaderSelector, go-zookeeper's zk.Lock)", "Mutex or Election"}
	kazooLockRecipe = Recipe{"kazoo's Lock or WriteLock", "Mutex (kazoo given extra_lock_patterns), or RWMutex with KazooNames()"}
	rwRecipe        = Recipe{"a read/write lock (zklock's RWMutex, Curator's InterProcessReadWriteLock)", "RWMutex"}
	kazooReadRecipe = Recipe{"kazoo's ReadLock", "RWMutex with KazooNames()"}
	latchRecipe     = Recipe{"a leader latch (Curator's LeaderLatch, zklock's Election with LatchNames)", "Election with LatchNames()"}
	leaseRecipe     = Recipe{"a semaphore's lease (zklock's Semaphore, Curator's InterProcessSemaphoreV2)", "Semaphore"}
	layoutRecipe    = Recipe{"a semaphore's layout (zklock's Semaphore, Curator's InterProcessSemaphoreV2 or InterProcessSemaphoreMutex)", "Semaphore"}
	unknownRecipe   = Recipe{"no lock recipe zklock knows: a path made inside this lock path (a nested lock path), or a lease of kazoo's Semaphore, which names its leases so", "none"}
)

// recipeOf says whose a child of a lock path is.
func recipeOf(name string) Recipe {
	n, ok := Parse(name)
	return recipeOfParsed(name, n, ok)
}

// recipeOfParsed is recipeOf for a name Parse has read already (n, ok).
func recipeOfParsed(name string, n Node, ok bool) Recipe {
	if name == Turnstile || name == Leases {
		return layoutRecipe
	}
	if !ok {
		return unknownRecipe
	}
	switch n.Marker {
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

// IsLatch reports whether name is a leader latch's node.
func IsLatch(name string) bool { return recipeOf(name) == latchRecipe }

// joins lists, for each way zklock names its nodes, the recipes whose nodes
// order with them on one path, seen from both sides. kazoo's Lock sees
// zklock's mutex nodes only when given extra_lock_patterns, which the tree
// cannot show: its nodes stay joinable, as documented.
func (s Style) joins() []Recipe {
	switch {
	case s.Kind == KindSemaphore:
		return []Recipe{leaseRecipe}
	case s == LatchStyle:
		return []Recipe{latchRecipe}
	case s.kazoo:
		return []Recipe{kazooLockRecipe, kazooReadRecipe}
	case s.Kind == KindRead, s.Kind == KindWrite:
		return []Recipe{rwRecipe}
	}
	return []Recipe{mutexRecipe, kazooLockRecipe}
}

// Listing is a lock path's children read once: its lock nodes in queue
// order, and the first child that a node of the reading style must not
// share the path with. A waiter reads one on every wake-up, so each name is
// parsed once for both.
type Listing struct {
	Nodes   []Node
	Foreign string // "" when every child may share the path
	Recipe  Recipe // whose Foreign is
}

// Read reads a listing of a lock path for a node named in style s.
func (s Style) Read(children []string) Listing {
	joins := s.joins()
	l := Listing{Nodes: make([]Node, 0, len(children))}
	found := false
	for _, name := range children {
		n, ok := Parse(name)
		if ok {
			l.Nodes = append(l.Nodes, n)
		}
		if r := recipeOfParsed(name, n, ok); !found && !joinable(joins, r) {
			l.Foreign, l.Recipe, found = name, r, true
		}
	}
	sortBySeq(l.Nodes)
	return l
}

func joinable(ok []Recipe, r Recipe) bool {
	for _, j := range ok {
		if j == r {
			return true
		}
	}
	return false
}

// ForeignToLayout returns the first of children (a listing of a semaphore's
// path) that is not part of its layout (kazoo's Semaphore keeps its leases
// there), and whose it is; ok is false when there is none.
func ForeignToLayout(children []string) (name string, r Recipe, ok bool) {
	for _, name := range children {
		if r := recipeOf(name); r != layoutRecipe {
			return name, r, true
		}
	}
	return "", Recipe{}, false
}
