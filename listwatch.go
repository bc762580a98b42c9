package zklock

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
// Whether an acquisition expects to hold at once is the guess of atOnce
// (atonce.go).

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
