package lockpath

// This file holds the pure part of waiting: deciding, from a listing of the
// lock path, whether a node holds and which node it must wait for. Primitives
// differ only in their Rule; the queue node's life (zklock's queue.go) and
// the wait (its watch.go) are shared.

// Rule decides for the node at index me of nodes (lock nodes in queue
// order) whether it holds, and if not, the index of the one node it waits for
// (its watch). A mutex holds when first and waits for the node just ahead; a
// read lock would wait only for the nearest write node ahead; a semaphore of
// n permits would hold among the first n and wait for the node n places
// ahead.
//
// A rule must be monotone: removing nodes ahead of me never turns a holder
// into a waiter. Then, where nobody can join ahead, a waiter whose blocker
// was the last thing between it and the lock holds once the blocker is gone,
// without listing again (see Turn.Last and mayJoinAhead).
type Rule func(nodes []Node, me int) (holds bool, blocker int)

// MutexTurn is the rule of an exclusive lock: first come, first served.
func MutexTurn(nodes []Node, me int) (bool, int) {
	if me == 0 {
		return true, -1
	}
	return false, me - 1
}

// ReaderTurn is the rule of a reader: it holds when no writer is ahead, and
// waits only for the nearest writer ahead. So one writer's release wakes
// exactly the readers between it and the next writer, and a stream of
// readers arriving after a writer queues behind it (no writer starves). A
// writer uses MutexTurn: it waits for the node just ahead, reader or writer.
func ReaderTurn(nodes []Node, me int) (bool, int) {
	for i := me - 1; i >= 0; i-- {
		if !nodes[i].Shared {
			return false, i
		}
	}
	return true, -1
}

// SlotsTurn is the rule of a semaphore of n permits: a lease holds while it
// is among the first n. It is monotone, so at most n ever hold.
func SlotsTurn(n int) Rule {
	return func(_ []Node, me int) (bool, int) {
		if me < n {
			return true, -1
		}
		return false, me - n
	}
}

// Turn is what one listing says about a node.
type Turn struct {
	Present bool   // the node is in the listing
	Holds   bool   // it holds the lock
	Blocker string // the name of the node to wait for, when it does not hold
	// Last: the blocker's leaving alone makes it hold, and nobody can join
	// ahead meanwhile (mayJoinAhead), so no listing is needed then.
	Last  bool
	Ahead []Node // the nodes ahead of it, in queue order
}

// Nobody joins ahead of a waiter where every node is sequential: ZooKeeper
// numbers a path's sequential nodes in creation order, so every node made
// after the waiter's sorts behind it. zklock's own nodes, kazoo's, Curator's
// mutex, semaphore and latch nodes and go-zookeeper's are all sequential. Two
// exceptions are known, and both are met by listing before holding:
//
//   - Curator 5.5 and later downgrade a write lock with a plain (not
//     sequential) ephemeral reader node carrying the writer's number, made
//     before the writer's node goes: it sorts at the writer's place. So a
//     waiter that a reader would block does not hold when a writer ahead
//     of it leaves, without a listing.
//   - Any peer that makes a node with a number of its own: seen as two nodes
//     with one number, or as a node ahead of the waiter that an earlier
//     listing did not have (JoinedAhead).
//
// mayJoinAhead reports whether, in nodes, a node may appear ahead of the one
// at me while it waits for the one at b.
func mayJoinAhead(rule Rule, nodes []Node, me, b int) bool {
	if !nodes[b].Shared && nodes[b].Marker == "__WRIT__" {
		if holds, _ := rule([]Node{{Shared: true}, {}}, 1); !holds {
			return true // a reader ahead would block this waiter
		}
	}
	for i := 1; i <= me; i++ {
		if nodes[i].Seq == nodes[i-1].Seq {
			return true
		}
	}
	return false
}

// Seen is what a waiter keeps, between listings, of the nodes that were
// ahead of it: each one's number and a 64-bit FNV-1a hash of its name, in
// queue order. Keeping the nodes themselves kept every name of the listing
// alive for the whole wait, some hundred bytes per node ahead, in every
// waiter; this keeps 16. Two names that differ yet agree on both are the
// only way a join could go unseen: a chance of 2^-64 per node.
type Seen []seenNode

type seenNode struct {
	seq  int64
	hash uint64
}

// SeenOf records ahead, the nodes ahead of a waiter at a listing.
func SeenOf(ahead []Node) Seen {
	s := make(Seen, len(ahead))
	for i, n := range ahead {
		s[i] = seenNode{n.Seq, nameHash(n.Name)}
	}
	return s
}

// nameHash is FNV-1a (hash/fnv's New64a) without its allocations: every
// wake-up hashes the names ahead.
func nameHash(name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return h
}

// JoinedAhead reports that ahead holds a node that before, an earlier
// listing's nodes ahead of the same waiter, did not: a node joined ahead.
// Nodes only leave the part of a queue ahead of a waiter, in order, so ahead
// must be a subsequence of before.
func (before Seen) JoinedAhead(ahead []Node) bool {
	i := 0
	for _, n := range ahead {
		want := seenNode{n.Seq, nameHash(n.Name)}
		for i < len(before) && before[i] != want {
			i++
		}
		if i == len(before) {
			return true
		}
		i++
	}
	return false
}

// ReadTurn applies rule to a listing for the node called name.
func ReadTurn(rule Rule, children []string, name string) Turn {
	return TurnIn(rule, Sorted(children), name)
}

// TurnIn applies rule to nodes, a listing in queue order (Listing.Nodes),
// for the node called name.
func TurnIn(rule Rule, nodes []Node, name string) Turn {
	me := -1
	for i, n := range nodes {
		if n.Name == name {
			me = i
			break
		}
	}
	if me < 0 {
		return Turn{}
	}
	ahead := nodes[:me]
	holds, b := rule(nodes, me)
	if holds {
		return Turn{Present: true, Holds: true, Ahead: ahead}
	}
	without := append(append(make([]Node, 0, len(nodes)-1), nodes[:b]...), nodes[b+1:]...)
	after := me
	if b < me {
		after--
	}
	last, _ := rule(without, after)
	last = last && !mayJoinAhead(rule, nodes, me, b)
	return Turn{Present: true, Blocker: nodes[b].Name, Last: last, Ahead: ahead}
}
