package zklock

import "github.com/go-zookeeper/zk"

// What a create and the listing sent behind it come back with.

// createdNode is a create's outcome: the node's name and its session.
type createdNode struct {
	name    string
	session int64
	czxid   int64 // the creation zxid, from the reply as the wire saw it; 0 if unknown
}

// firstListing is the listing sent right behind a create, and the child
// watch it set, if asked to.
type firstListing struct {
	children []string
	ev       <-chan zk.Event
}

// contains reports whether list holds s.
func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
