package zklock

import (
	"context"
)

// SetHookBeforeLease runs fn between a grant of c's and the making of its
// lease (a process pause at the worst moment); nil removes it.
func SetHookBeforeLease(c *Client, fn func()) {
	if fn == nil {
		testHookBeforeLease.Delete(c)
		return
	}
	testHookBeforeLease.Store(c, fn)
}

// OwnReadDone is closed once l's own-node read (token and own-node watch)
// has finished; a MultiLock's lease: its first part's.
// Without the own-node watch there is no such read: it is closed at once.
func OwnReadDone(l *Lease) <-chan struct{} {
	l = l.Parts()[0]
	if !l.c.opts.watchOwnNode || l.onNode().q.brief {
		done := make(chan struct{})
		close(done)
		return done
	}
	return l.onNode().q.fetched
}

// EnsureParents creates lockPath and its missing ancestors, as Acquire does
// when the lock path is missing.
func EnsureParents(ctx context.Context, c *Client, lockPath string) error {
	return c.parents.ensure(ctx, lockPath)
}

// HandOffProof says what l's grant rested on, when it was granted as the
// node ahead went: the connection epoch its own-node read was sent on, the
// epoch at the grant, and whether that read came after the node ahead was
// seen gone. Zeros when l holds from a listing.
func HandOffProof(l *Lease) (read, grant uint64, after bool) {
	p := l.onNode().q.proof
	return p.read, p.grant, p.after
}

// ConnEpoch counts the connections c has opened (0 without its wire).
func ConnEpoch(c *Client) uint64 { return c.wire.ConnEpoch() }

// SetHookRewatch runs fn before a lease's monitor sets its own-node watch
// again after a data change; nil removes it.
func SetHookRewatch(fn func()) {
	if fn == nil {
		testHookRewatch.Store(nil)
		return
	}
	testHookRewatch.Store(&fn)
}

// SetHookCleanerRead runs fn(p) after each read of p's stat the cleaner acts
// on, before it acts; nil removes it.
func SetHookCleanerRead(fn func(p string)) {
	if fn == nil {
		testHookCleanerRead.Store(nil)
		return
	}
	testHookCleanerRead.Store(&fn)
}

// CleanNow runs c's cleanup of lockPath now, as its timer would.
func CleanNow(c *Client, lockPath string) { c.cleaner.clean(lockPath) }

// SetHookAfterCreate runs fn between a create's reply and the reading of its
// session (a pause at the worst moment); nil removes it.
func SetHookAfterCreate(fn func()) {
	if fn == nil {
		testHookAfterCreate.Store(nil)
		return
	}
	testHookAfterCreate.Store(&fn)
}

// ListWatched reports that l is watched through its first listing
// (listwatch.go), not through a read of its node.
func ListWatched(l *Lease) bool { return l.onNode() != nil && l.onNode().q.listWatched }

// StallMonitors holds c's loss clock, which every lease monitor takes on
// each turn of its loop: the monitors stop between two selects until
// ResumeMonitors (a loaded host, at the worst moment).
func StallMonitors(c *Client) { c.clock.mu.Lock() }

// ResumeMonitors lets c's lease monitors go on.
func ResumeMonitors(c *Client) { c.clock.mu.Unlock() }

// LossDue reports that c's leases must be presumed lost now: no word from
// ZooKeeper's leader for the loss fraction of the granted timeout.
func LossDue(c *Client) bool { return c.clock.due() }
