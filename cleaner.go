package zklock

import (
	"context"
	"errors"
	"log/slog"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// maxPendingCleanups bounds the cleaner's memory. Past it, new cleanups are
// dropped: container nodes are still removed by the server, and a path used
// again is scheduled again when released.
const maxPendingCleanups = 10000

// cleaner removes lock paths that have become empty, a while after the last
// contender left, and with a cleanup root, their empty ancestors below it:
// only nodes this client created (see mine).
// Pending cleanups are coalesced (one timer per path) and run at once on
// Close. It never makes a contender fail: it deletes with a version only
// its own node can have (see stamp) and treats NotEmpty, BadVersion and
// NoNode as "in use again, skip", and a contender whose create finds the
// path gone creates it again.
type cleaner struct {
	conn    *zk.Conn
	log     *slog.Logger
	metrics Metrics
	delay   time.Duration
	root    string
	// connEnded is closed when the connection has ended for good (the
	// caller closed its own, or Close): a request then fails at once, and
	// is not tried again.
	connEnded <-chan struct{}

	mu       sync.Mutex
	closed   bool
	closeCtx context.Context // Close's bound on the last cleanups, once closed
	pending  map[string]*time.Timer
	wg       sync.WaitGroup

	// mine holds the nodes this client created, by creation zxid: the
	// cleaner deletes only those. A node another library created (kazoo's
	// Lock creates its path once per object and fails without it) or
	// re-created after a deletion has another zxid and is left alone.
	// Nodes other zklock clients created are left to them, or to the
	// server, which removes empty container nodes by itself.
	mineMu sync.Mutex
	mine   map[string]int64
}

func newCleaner(conn *zk.Conn, connEnded <-chan struct{}, o options) *cleaner {
	return &cleaner{conn: conn, connEnded: connEnded, log: o.logger, metrics: o.metrics, delay: o.cleanupDelay, root: o.cleanupRoot,
		pending: make(map[string]*time.Timer), mine: make(map[string]int64)}
}

// remember records that this client created p, with stat as read after the
// create (nil when p is gone). Past maxPendingCleanups nodes an older record
// is dropped (a path the server's container check may have removed already).
func (cl *cleaner) remember(stat *zk.Stat, p string) {
	if stat == nil || cl.delay <= 0 {
		return
	}
	cl.mineMu.Lock()
	defer cl.mineMu.Unlock()
	if len(cl.mine) >= maxPendingCleanups {
		for old := range cl.mine { // one the server may have removed: left to it from now on
			delete(cl.mine, old)
			break
		}
	}
	cl.mine[p] = stat.Czxid
}

// adoptUnused records p as this client's, with stat read after a create of
// p whose reply was lost found p existing, if p never had a child: then
// either this client made it, or a peer made it a moment ago and is about to
// add a child (a cleanup that removes it makes that peer's create start
// over). A container that had a child is left to the server, which removes
// it once empty.
func (cl *cleaner) adoptUnused(stat *zk.Stat, p string) {
	if stat != nil && stat.Cversion == 0 && stat.NumChildren == 0 {
		cl.remember(stat, p)
	}
}

// exists reads p's stat: a nil stat and no error when p is missing.
func (cl *cleaner) exists(p string) (*zk.Stat, error) {
	ok, stat, err := cl.conn.Exists(p)
	if !ok {
		stat = nil
	}
	return stat, err
}

// isMine reports whether the node at p with creation zxid czxid is one this
// client created.
func (cl *cleaner) isMine(p string, czxid int64) bool {
	cl.mineMu.Lock()
	defer cl.mineMu.Unlock()
	z, ok := cl.mine[p]
	return ok && z == czxid
}

// forget drops p once it is deleted.
func (cl *cleaner) forget(p string) {
	cl.mineMu.Lock()
	delete(cl.mine, p)
	cl.mineMu.Unlock()
}

// forgetNode drops p's record if it still names the node made at czxid.
func (cl *cleaner) forgetNode(p string, czxid int64) {
	cl.mineMu.Lock()
	if cl.mine[p] == czxid {
		delete(cl.mine, p)
	}
	cl.mineMu.Unlock()
}

// mayRemove reports whether the cleaner may delete p, an ancestor of lockPath
// or lockPath itself. Such nodes are created as containers. The cleanup root
// and what lies above it are never removed, even when a lock path is one of
// them.
func (cl *cleaner) mayRemove(p, lockPath string) bool {
	if cl.root != "" && (p == cl.root || strings.HasPrefix(cl.root, p+"/") || p == "/") {
		return false
	}
	return p == lockPath || cl.underRoot(p)
}

// underRoot reports whether p lies strictly below the cleanup root.
func (cl *cleaner) underRoot(p string) bool {
	switch {
	case cl.root == "":
		return false
	case cl.root == "/":
		return p != "/"
	default:
		return strings.HasPrefix(p, cl.root+"/")
	}
}

// schedule arranges for lockPath to be checked after the delay.
func (cl *cleaner) schedule(lockPath string) {
	if cl.delay <= 0 {
		return
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.scheduleLocked(lockPath)
}

// scheduleOrClean schedules lockPath's cleanup, or, once Close has run the
// pending ones, cleans it now: for a background goroutine Close waits for,
// whose news (a node this client made) can come after Close began.
func (cl *cleaner) scheduleOrClean(lockPath string) {
	if cl.delay <= 0 {
		return
	}
	cl.mu.Lock()
	closed, ctx := cl.closed, cl.closeCtx
	if !closed {
		cl.scheduleLocked(lockPath)
	}
	cl.mu.Unlock()
	if closed && cl.clean(lockPath) == cleanUnanswered {
		cl.retryWhile(ctx, lockPath)
	}
}

// scheduleLocked is schedule with cl.mu held.
func (cl *cleaner) scheduleLocked(lockPath string) {
	if cl.closed || cl.pending[lockPath] != nil {
		return
	}
	if len(cl.pending) >= maxPendingCleanups {
		cl.log.Warn("zklock: too many pending cleanups; leaving this one to the server", "path", lockPath)
		return
	}
	cl.pending[lockPath] = time.AfterFunc(cl.delay, func() {
		cl.mu.Lock()
		if cl.closed || cl.pending[lockPath] == nil {
			cl.mu.Unlock()
			return
		}
		delete(cl.pending, lockPath)
		cl.wg.Add(1)
		cl.mu.Unlock()
		defer cl.wg.Done()
		if cl.clean(lockPath) == cleanUnanswered {
			cl.log.Debug("zklock: cleanup unanswered; trying again after the delay", "path", lockPath)
			cl.again(lockPath)
		}
	})
}

// again follows a cleanup of lockPath that went unanswered: it is tried
// after the delay, or, once Close has begun meanwhile, within Close's bound.
func (cl *cleaner) again(lockPath string) {
	cl.mu.Lock()
	closed, ctx := cl.closed, cl.closeCtx
	if !closed {
		cl.scheduleLocked(lockPath)
	}
	cl.mu.Unlock()
	if closed {
		cl.retryWhile(ctx, lockPath)
	}
}

// A cleanup's outcome.
type cleanOutcome int

const (
	cleanDone       cleanOutcome = iota // removed, or in use: nothing left to do
	cleanUnanswered                     // a request went unanswered: the node's state is unknown
)

// unanswered reports a request that failed for want of an answer (a cut
// connection, an expired session: the next session may delete the node),
// not because of the node, nor because the connection has ended for good.
func (cl *cleaner) unanswered(err error) bool {
	return (classify(err) == errConnection || errors.Is(err, zk.ErrSessionExpired)) && !isDone(cl.connEnded)
}

// clean deletes lockPath if it is empty, then its empty ancestors below the
// root, stopping at the first node that is in use. A missing node is passed
// over: a create of the lock path that failed half-way leaves ancestors that
// never had a child, which the server does not remove even as containers.
// A cleanup whose request went unanswered is tried again (cleanUnanswered):
// a path that never had a child (made for a caller that then gave up, or
// refused as nested and its delete unanswered) is one the server never
// removes, and a nested one keeps its enclosing lock path refused to all.
func (cl *cleaner) clean(lockPath string) cleanOutcome {
	for p := lockPath; cl.mayRemove(p, lockPath); p = path.Dir(p) {
		if p == "/" || p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
			return cleanDone
		}
		gone, err := cl.cleanOne(p)
		if cl.unanswered(err) {
			return cleanUnanswered
		}
		if !gone {
			return cleanDone
		}
	}
	return cleanDone
}

// cleanOne deletes p if it is an empty node this client made; gone is true
// if p is gone now (go on to its parent). err is the request's failure
// that left p's state unknown, if any.
func (cl *cleaner) cleanOne(p string) (gone bool, err error) {
	ok, stat, err := cl.conn.Exists(p)
	if err == nil && !ok {
		return true, nil
	}
	cleanerRead(p)
	if err != nil || !cl.removable(p, stat) {
		return false, err
	}
	if stat.Version == 0 {
		if stat, err = cl.stamp(p, stat); stat == nil {
			return false, err
		}
		cleanerRead(p)
	}
	switch err := cl.conn.Delete(p, stat.Version); {
	case err == nil:
		cl.forget(p)
		cl.log.Debug("zklock: removed empty lock path", "path", p)
		cl.metrics.CleanerDeleted(p)
		return true, nil
	case errors.Is(err, zk.ErrNoNode):
		cl.forget(p) // someone else cleaned it
	case errors.Is(err, zk.ErrNotEmpty), errors.Is(err, zk.ErrBadVersion):
		// in use again, or made again by someone else
	default:
		cl.log.Debug("zklock: cleanup skipped", "path", p, "err", err)
		return false, err
	}
	return false, nil
}

// removable reports whether stat, read at p, is an empty persistent node
// this client made.
func (cl *cleaner) removable(p string, stat *zk.Stat) bool {
	return stat.NumChildren == 0 && stat.EphemeralOwner == 0 && cl.isMine(p, stat.Czxid)
}

// stamp writes p's empty data again, so that its version is no longer 0,
// and returns the node's stat if it is still this client's and empty.
// ZooKeeper's delete checks only the data version, and a node made anew
// has version 0: without the stamp, a delete with the version read could
// remove a node someone made at p since the read (kazoo's Lock makes its
// path once and fails without it). The write's reply names the node it
// reached: if that is such a new node, the write only moved its version
// (its data is empty, as Curator, kazoo and zklock make lock paths) and
// nothing is deleted.
// err is the write's failure when it was not answered.
func (cl *cleaner) stamp(p string, read *zk.Stat) (*zk.Stat, error) {
	stat, err := cl.conn.Set(p, []byte{}, 0)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		cl.forget(p)
		return nil, nil
	case cl.unanswered(err): // tried again later (clean)
		return nil, err
	case err != nil: // written meanwhile
		return nil, nil
	case !cl.isMine(p, stat.Czxid):
		cl.forgetNode(p, read.Czxid)
		cl.log.Debug("zklock: cleanup skipped: path made again by someone else", "path", p)
		return nil, nil
	case !cl.removable(p, stat):
		return nil, nil
	}
	return stat, nil
}

// testHookCleanerRead, set only by tests, runs after each read of a node's
// stat the cleaner acts on, before it acts.
var testHookCleanerRead atomic.Pointer[func(p string)]

func cleanerRead(p string) {
	if hook := testHookCleanerRead.Load(); hook != nil {
		(*hook)(p)
	}
}

// close runs every pending cleanup now, waiting until ctx ends at most,
// and refuses new ones.
func (cl *cleaner) close(ctx context.Context) {
	cl.mu.Lock()
	cl.closed, cl.closeCtx = true, ctx
	paths := make([]string, 0, len(cl.pending))
	for p, t := range cl.pending {
		t.Stop()
		paths = append(paths, p)
	}
	cl.pending = nil
	cl.wg.Add(1)
	cl.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer cl.wg.Done()
		defer close(done)
		for _, p := range paths {
			if cl.clean(p) == cleanUnanswered {
				cl.retryWhile(ctx, p)
			}
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// retryWhile cleans p again every 100 ms while its requests go unanswered
// and ctx (Close's) lasts: the last chance for a path that never had a
// child.
func (cl *cleaner) retryWhile(ctx context.Context, p string) {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		if cl.clean(p) != cleanUnanswered {
			return
		}
		t.Reset(100 * time.Millisecond)
	}
}

// wait waits for cleanups under way; call after the connection is closed.
func (cl *cleaner) wait() { cl.wg.Wait() }
