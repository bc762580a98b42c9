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
// into a waiter. Then, since sequence numbers only grow and nobody can join
// ahead, a waiter whose blocker was the last thing between it and the lock
// holds once the blocker is gone, without listing again (see turn.last).
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
	last    bool   // the blocker's leaving alone makes it hold
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
	holds, b := rule(nodes, me)
	if holds {
		return turn{present: true, holds: true}
	}
	without := append(append(make([]lockNode, 0, len(nodes)-1), nodes[:b]...), nodes[b+1:]...)
	after := me
	if b < me {
		after--
	}
	last, _ := rule(without, after)
	return turn{present: true, blocker: nodes[b].name, last: last}
}
