package zklock

import (
	"strconv"
	"sync"
)

// holdTable is the client's reentrant holds, by lock path, then owner. It has
// its own lock: nothing else of the client is touched under it.
type holdTable struct {
	mu     sync.Mutex
	byPath map[string]map[string]*ownerHold
}

// ownerHold is one owner's holding of one path.
type ownerHold struct {
	ready     chan struct{} // closed once the first Acquire has finished
	lease     *Lease        // nil until ready, and after a failed first Acquire
	count     int
	releasing chan struct{} // non-nil while the last Release deletes the node
}

// holdKey names an owner in the table: the explicit owner ContextWithOwner
// named, or else the goroutine.
func holdKey(explicit string, goroutine int64) string {
	if explicit != "" {
		return "o:" + explicit
	}
	return "g:" + strconv.FormatInt(goroutine, 10)
}

// heldByOther reports whether an owner other than key holds the lock (not
// merely queues for it); the table's lock is held.
func heldByOther(holds map[string]*ownerHold, key string) bool {
	for k, h := range holds {
		if k != key && h.lease != nil {
			return true
		}
	}
	return false
}
