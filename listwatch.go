package zklock

import (
	"hash/maphash"
	"sync/atomic"
)

// The first listing's watch: a mutex whose last acquisitions held at once
// expects this one to as well, and sends the listing behind its create with
// a child watch on the lock path. If the listing shows its node first, the
// node holds, its fencing token is the create's zxid, and that child watch
// stands in for the own-node watch: an uncontended acquisition then reads
// nothing but the listing, as a queue lock without the watch would, and the
// holder still hears at once of anything that happens under the path.
//
// A child event proves nothing by itself (someone joined, or left, or took
// the holder's node), so the monitor reads the node on it, setting the
// own-node watch from then on: its absence is the loss. While the lease is
// being released (or has ended) the event is most likely its own delete,
// and the Release's outcome says whose delete it was: the read waits until
// the lease is held again, which it is only if the server refused the
// delete. A request to release arrives as a data change, which a child
// watch does not see: RevokeRequested sets the own-node watch first.
//
// A node that waited, or a listing that showed it behind others, never uses
// the child watch: it fires at the next change of the path and is dropped,
// one watch event for nothing. So only a path whose last two acquisitions
// by this client held at once is expected to (atOnce): a contended path, or
// one not seen yet, keeps the own-node read.

// atOnce remembers, per lock path, how many of the client's last
// acquisitions of it held at once in a row (none, one, two or more), and
// expects the next to hold at once after two: one acquisition alone at
// once is as often a gap in a busy queue, where the listing's watch would
// be wasted. Paths are hashed into a fixed table (2 bits a slot, 4 KiB a
// client, however many paths): paths that share a slot share a guess,
// which costs at most a read or a watch event, never correctness.
type atOnce struct {
	seed  maphash.Seed
	words [512]atomic.Uint64
}

const atOnceTrusted = 2 // acquisitions at once in a row before the next is expected to be

func newAtOnce() *atOnce { return &atOnce{seed: maphash.MakeSeed()} }

func (a *atOnce) slotOf(path string) (*atomic.Uint64, uint) {
	h := maphash.String(a.seed, path)
	return &a.words[h%uint64(len(a.words))], uint(h>>59) * 2 // 32 slots of 2 bits per word
}

// predicts reports that the last acquisitions of path held at once.
func (a *atOnce) predicts(path string) bool {
	w, shift := a.slotOf(path)
	return (w.Load()>>shift)&3 >= atOnceTrusted
}

// learn counts an acquisition of path that held at once, or starts over.
func (a *atOnce) learn(path string, held bool) {
	w, shift := a.slotOf(path)
	for {
		old := w.Load()
		n := uint64(0)
		if held {
			n = min((old>>shift)&3+1, atOnceTrusted)
		}
		if w.CompareAndSwap(old, old&^(3<<shift)|n<<shift) {
			return
		}
	}
}

// useListWatch makes the first listing's child watch q's own-node watch, if
// q held at once by that listing and its fencing token came with the
// create's reply; it reports whether it did. The lease then needs no read
// of its node.
func (q *queueNode) useListWatch() bool {
	if q.listEv == nil || !q.heldAtOnce || q.createZxid == 0 {
		return false
	}
	q.listWatched = true
	q.finishFetch(ownRead{czxid: q.createZxid, owner: q.sess.id, ev: q.listEv}, nil)
	return true
}
