package zklock

import (
	"context"

	"github.com/zklock/zklock/internal/lockpath"
)

// RWMutex is a fair distributed reader/writer lock on one ZooKeeper path:
// any number of readers hold it together, a writer holds it alone. Requests
// are served in the order they joined the queue, so a writer waits only for
// those ahead of it and readers that arrive after a waiting writer queue
// behind it: a stream of readers never starves a writer.
//
// There is no herd: a reader watches only the nearest writer ahead of it, a
// writer only the node just ahead, so a writer's release wakes exactly the
// readers it frees. Leases are the same as a Mutex's: Done, Err, Token and
// Release, and a lease can be lost (see Lease).
//
// The nodes are named as Curator's InterProcessReadWriteLock names them
// ("__READ__" and "__WRIT__"), so zklock and Curator exclude each other on one
// path; with KazooNames they are named as kazoo's ReadLock and WriteLock
// name theirs. zklock recognises both forms, and the mutex forms of Curator,
// kazoo and go-zookeeper (as writers), whichever it writes.
type RWMutex struct {
	c     *Client
	path  string
	read  lockpath.Style
	write lockpath.Style
}

// RWOption configures an RWMutex.
type RWOption func(*RWMutex)

// KazooNames makes an RWMutex name its nodes as kazoo's ReadLock and
// WriteLock do ("<id>__rlock__", "<id>__lock__"), for a path shared with
// kazoo: kazoo's readers recognise only kazoo's writer names. Curator's
// InterProcessReadWriteLock orders kazoo's names wrongly: a path cannot be
// shared by Curator and kazoo read/write locks, whatever zklock writes.
func KazooNames() RWOption {
	return func(rw *RWMutex) { rw.read, rw.write = lockpath.KazooRead, lockpath.KazooWrite }
}

// NewRWMutex returns an RWMutex on path. It checks the path and does no I/O.
func (c *Client) NewRWMutex(path string, opts ...RWOption) (*RWMutex, error) {
	if err := validatePath(path); err != nil {
		return nil, err
	}
	rw := &RWMutex{c: c, path: path, read: lockpath.CuratorRead, write: lockpath.CuratorWrite}
	for _, o := range opts {
		o(rw)
	}
	return rw, nil
}

// Path returns the lock path.
func (rw *RWMutex) Path() string { return rw.path }

// AcquireRead blocks until the caller holds the lock as a reader, as
// Mutex.Acquire does: a ctx deadline is the timeout, and a failed or
// cancelled call leaves nothing behind.
func (rw *RWMutex) AcquireRead(ctx context.Context) (*Lease, error) {
	return opError("acquire-read", rw.path)(rw.c.acquire(ctx, rw.ask(ctx, rw.read, lockpath.ReaderTurn, false)))
}

// TryAcquireRead takes a read lease only if no writer holds or waits ahead;
// otherwise it returns ErrLocked and leaves nothing behind. Like
// Mutex.TryAcquire, it waits for ZooKeeper at most ctx or the session timeout.
func (rw *RWMutex) TryAcquireRead(ctx context.Context) (*Lease, error) {
	return opError("try-acquire-read", rw.path)(rw.c.acquire(ctx, rw.ask(ctx, rw.read, lockpath.ReaderTurn, true)))
}

// AcquireWrite blocks until the caller holds the lock alone, as
// Mutex.Acquire does.
func (rw *RWMutex) AcquireWrite(ctx context.Context) (*Lease, error) {
	return opError("acquire-write", rw.path)(rw.c.acquire(ctx, rw.ask(ctx, rw.write, lockpath.MutexTurn, false)))
}

// TryAcquireWrite takes the write lease only if nobody holds or waits;
// otherwise it returns ErrLocked and leaves nothing behind. Like
// Mutex.TryAcquire, it waits for ZooKeeper at most ctx or the session timeout.
func (rw *RWMutex) TryAcquireWrite(ctx context.Context) (*Lease, error) {
	return opError("try-acquire-write", rw.path)(rw.c.acquire(ctx, rw.ask(ctx, rw.write, lockpath.MutexTurn, true)))
}

func (rw *RWMutex) ask(ctx context.Context, style lockpath.Style, rule lockpath.Rule, try bool) ask {
	a := rw.c.exclusive(ctx, rw.path, try)
	a.style, a.rule = style, rule
	return a
}
