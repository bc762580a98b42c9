package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/internal/benchkit"
)

// The kinds of locker measured side by side. floor is not a lock: it sends
// the requests every queue lock needs (create, list, delete) and nothing
// else, so it is the bare client's cost per cycle.
const (
	kindZklock  = "zklock"
	kindNoWatch = "zklock-nowatch" // WithOwnNodeWatch(false)
	kindZkLock  = "zk.Lock"
	kindFloor   = "floor"
)

var allKinds = []string{kindZklock, kindNoWatch, kindZkLock, kindFloor}

func isLock(kind string) bool { return kind != kindFloor }

// locker is one worker's lock on one path, on its own session.
type locker interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
	close()
}

// sessionTimeout is long enough that no session expires in a run.
const sessionTimeout = 10 * time.Second

func newLocker(ctx context.Context, kind string, addrs []string, path string) (locker, error) {
	switch kind {
	case kindZklock, kindNoWatch:
		c, err := zklock.Connect(ctx, addrs,
			zklock.WithSessionTimeout(sessionTimeout),
			zklock.WithCleanupDelay(0), // the paths are reused: keep them
			zklock.WithOwnNodeWatch(kind == kindZklock))
		if err != nil {
			return nil, err
		}
		m, err := c.NewMutex(path)
		if err != nil {
			c.Close()
			return nil, err
		}
		return &zklockLocker{c: c, m: m}, nil
	case kindZkLock, kindFloor:
		conn, err := benchkit.RawConn(ctx, addrs, sessionTimeout)
		if err != nil {
			return nil, err
		}
		if kind == kindZkLock {
			return &zkLocker{conn: conn, l: zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))}, nil
		}
		if err := benchkit.EnsurePath(conn, path); err != nil {
			conn.Close()
			return nil, err
		}
		return &floorLocker{conn: conn, path: path}, nil
	}
	return nil, fmt.Errorf("unknown kind %q", kind)
}

type zklockLocker struct {
	c     *zklock.Client
	m     *zklock.Mutex
	lease *zklock.Lease
}

func (z *zklockLocker) lock(ctx context.Context) (err error) {
	z.lease, err = z.m.Acquire(ctx)
	return err
}

func (z *zklockLocker) unlock(ctx context.Context) error { return z.lease.Release(ctx) }
func (z *zklockLocker) close()                           { z.c.Close() }

type zkLocker struct {
	conn *zk.Conn
	l    *zk.Lock
}

func (z *zkLocker) lock(context.Context) error   { return z.l.Lock() }
func (z *zkLocker) unlock(context.Context) error { return z.l.Unlock() }
func (z *zkLocker) close()                       { z.conn.Close() }

type floorLocker struct {
	conn *zk.Conn
	path string
	node string
}

func (f *floorLocker) lock(context.Context) (err error) {
	f.node, err = f.conn.Create(f.path+"/n-lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err == nil {
		_, _, err = f.conn.Children(f.path)
	}
	return err
}

func (f *floorLocker) unlock(context.Context) error { return f.conn.Delete(f.node, -1) }
func (f *floorLocker) close()                       { f.conn.Close() }
