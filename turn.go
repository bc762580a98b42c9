package zklock

// This file holds the pure part of waiting: deciding, from a listing of the
// lock path, whether a node holds and which node it must wait for. Primitives
// differ only in their turnRule; the queue node's life (queue.go) and the
// wait (watch.go) are shared.

// turnRule decides for the node at index me of nodes (lock nodes in queue
// order) whether it holds, and if not, the index of the one node it waits for
// (its watch). A mutex holds when first and waits for the node just ahead; a
// read lock would wait only for the nearest write node ahead; a semaphore of
// n permits would hold among the first n and wait for the node n places
// ahead.
//
// A rule must be monotone: removing nodes ahead of me never turns a holder
// into a waiter. Then, where nobody can join ahead, a waiter whose blocker
// was the last thing between it and the lock holds once the blocker is gone,
// without listing again (see turn.last and mayJoinAhead).
type turnRule func(nodes []lockNode, me int) (holds bool, blocker int)

// mutexTurn is the rule of an exclusive lock: first come, first served.
func mutexTurn(nodes []lockNode, me int) (bool, int) {
	if me == 0 {
		return true, -1
	}
	return false, me - 1
}

// readerTurn is the rule of a reader: it holds when no writer is ahead, and
// waits only for the nearest writer ahead. So one writer's release wakes
// exactly the readers between it and the next writer, and a stream of
// readers arriving after a writer queues behind it (no writer starves). A
// writer uses mutexTurn: it waits for the node just ahead, reader or writer.
func readerTurn(nodes []lockNode, me int) (bool, int) {
	for i := me - 1; i >= 0; i-- {
		if !nodes[i].shared {
			return false, i
		}
	}
	return true, -1
}

// turn is what one listing says about a node.
type turn struct {
	present bool   // the node is in the listing
	holds   bool   // it holds the lock
	blocker string // the name of the node to wait for, when it does not hold
	// last: the blocker's leaving alone makes it hold, and nobody can join
	// ahead meanwhile (mayJoinAhead), so no listing is needed then.
	last  bool
	ahead []lockNode // the nodes ahead of it, in queue order
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
//     listing did not have (joinedAhead).
//
// mayJoinAhead reports whether, in nodes, a node may appear ahead of the one
// at me while it waits for the one at b.
func mayJoinAhead(rule turnRule, nodes []lockNode, me, b int) bool {
	if !nodes[b].shared && nodes[b].marker == "__WRIT__" {
		if holds, _ := rule([]lockNode{{shared: true}, {}}, 1); !holds {
			return true // a reader ahead would block this waiter
		}
	}
	for i := 1; i <= me; i++ {
		if nodes[i].seq == nodes[i-1].seq {
			return true
		}
	}
	return false
}

// joinedAhead reports that ahead holds a name that before, an earlier
// listing's names ahead of the same waiter, did not: a node joined ahead.
// Nodes only leave the part of a queue ahead of a waiter, in order, so ahead
// must be a subsequence of before.
func joinedAhead(before, ahead []lockNode) bool {
	i := 0
	for _, n := range ahead {
		for i < len(before) && before[i].name != n.name {
			i++
		}
		if i == len(before) {
			return true
		}
		i++
	}
	return false
}

// readTurn applies rule to a listing for the node called name.
func readTurn(rule turnRule, children []string, name string) turn {
	nodes := sortedLockNodes(children)
	me := -1
	for i, n := range nodes {
		if n.name == name {
			me = i
			break
		}
	}
	if me < 0 {
		return turn{}
	}
	ahead := nodes[:me]
	holds, b := rule(nodes, me)
	if holds {
		return turn{present: true, holds: true, ahead: ahead}
	}
	without := append(append(make([]lockNode, 0, len(nodes)-1), nodes[:b]...), nodes[b+1:]...)
	after := me
	if b < me {
		after--
	}
	last, _ := rule(without, after)
	last = last && !mayJoinAhead(rule, nodes, me, b)
	return turn{present: true, blocker: nodes[b].name, last: last, ahead: ahead}
}
