package zklock

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock/internal/lockpath"
)

// Revocation is a request to a holder to release, made by writing a fixed
// message into its node, as Curator's Revoker does: a Curator holder made
// revocable hears zklock's requests, and a zklock holder hears Curator's.
// It is cooperative: nothing is taken from a holder that does not listen
// (zklock break deletes the node instead).

// RevokeRequested returns a channel closed once someone has asked the holder
// to release (AskToRelease, zklock break --ask, Curator's Revoker). A holder
// that honours such requests selects on it and releases. Contenders shows
// the node with RevokeRequested set (and, after AskToRelease, its owner
// still; after Curator's Revoker, no owner). It is heard through the
// own-node watch, at no extra request, except for a Mutex lease granted at
// once, which watches its listing instead: its first RevokeRequested sets
// the own-node watch (one read). With WithOwnNodeWatch(false) the channel
// never closes. A MultiLock's lease hears a request to any part.
func (l *Lease) RevokeRequested() <-chan struct{} {
	l.h.listen()
	return l.revoke
}

// revokeRequested closes the revoke channel once and tells the hooks (a
// MultiLock lease made of this part).
func (l *Lease) revokeRequested() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if isDone(l.revoke) {
		return
	}
	close(l.revoke)
	for _, fn := range l.onRevoke {
		fn()
	}
	l.onRevoke = nil
}

// whenRevokeRequested runs fn once a release is asked for, or now if it
// has been; fn runs under the lease's lock and must not block.
func (l *Lease) whenRevokeRequested(fn func()) {
	l.h.listen()
	l.mu.Lock()
	defer l.mu.Unlock()
	if isDone(l.revoke) {
		fn()
		return
	}
	l.onRevoke = append(l.onRevoke, fn)
}

// AskToRelease asks the holder of the lock node node (a Contender's Node) to
// release it. Into a node with zklock's owner record it writes that record
// back marked Revoke (a read, then a write checked against the version
// read, tried again if the record changed meanwhile); into any other it
// writes the message Curator's Revoker.attemptRevoke writes, which a
// revocable Curator holder hears. It returns
// once ZooKeeper has stored the request, which does not mean the holder has
// heard it or will honour it. It refuses a node that is not a lock node, so
// a lock path's own data (a semaphore's limit) is never overwritten, and a
// leader latch's node (ErrInvalidArgument: LeaderLatch has no revocation),
// and returns within ctx or the session timeout.
func (c *Client) AskToRelease(ctx context.Context, node string) error {
	if err := validateOpPath(node, false); err != nil {
		return err
	}
	if err := validatePath(path.Dir(node)); err != nil { // its lock path
		return err
	}
	if _, ok := lockpath.Parse(path.Base(node)); !ok {
		return fmt.Errorf("%w %q: not a lock node (ask a holder's node, from Contenders)", ErrInvalidPath, node)
	}
	if lockpath.IsLatch(path.Base(node)) {
		// Curator's LeaderLatch has no revocation, and the request would
		// replace the participant id its getLeader reports.
		return fmt.Errorf("%w: %q is a leader latch's node, and a latch cannot be asked to release", ErrInvalidArgument, node)
	}
	ctx, scope, err := c.begin(ctx, true)
	if err != nil {
		return err
	}
	defer scope.end()
	err = writeRevoke(ctx, c, node)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("zklock: ask %s to release: the node is gone (released or lost): %w", node, err)
	case classify(err) == errConnection:
		return fmt.Errorf("%w: ask %s to release: %w", ErrUnreachable, node, err)
	}
	return fmt.Errorf("zklock: ask %s to release: %w", node, err)
}

// writeRevoke writes the request into node: zklock's record marked Revoke,
// or Curator's message into any other data. A record changed between the
// read and the write (Proclaim, another request) is read again.
func writeRevoke(ctx context.Context, c *Client, node string) error {
	for {
		type got struct {
			data []byte
			stat *zk.Stat
		}
		r, err := call(ctx, c, func() (got, error) {
			data, stat, err := c.conn.Get(node)
			return got{data, stat}, err
		})
		if err != nil {
			return err
		}
		data, version := revokeMessage, r.stat.Version
		if o, ok := parseOwner(r.data); ok {
			o.Revoke = true
			data = o.marshal()
		}
		_, err = call(ctx, c, func() (*zk.Stat, error) { return c.conn.Set(node, data, version) })
		if !errors.Is(err, zk.ErrBadVersion) {
			return err
		}
	}
}

// dataWatch asks the monitor of a lease watched through its listing to set
// the own-node watch, which hears requests to release; a no-op for others.
type dataWatch struct {
	once   sync.Once
	wanted chan struct{} // nil unless the lease is watched through its listing
}

func newDataWatch(listWatched bool) *dataWatch {
	if !listWatched {
		return nil
	}
	return &dataWatch{wanted: make(chan struct{})}
}

func (d *dataWatch) requestNodeWatch() {
	if d != nil {
		d.once.Do(func() { close(d.wanted) })
	}
}

// nodeWatchRequested is closed once the own-node watch is wanted; nil (never) for a
// lease with its own-node watch from the start.
func (d *dataWatch) nodeWatchRequested() <-chan struct{} {
	if d == nil {
		return nil
	}
	return d.wanted
}
