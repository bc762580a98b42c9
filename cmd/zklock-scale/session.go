package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/internal/benchkit"
)

// The libraries a run can measure.
const (
	libZklock      = "zklock"
	libZklockNoOwn = "zklock-noown" // zklock with WithOwnNodeWatch(false)
	libZkLock      = "zk.Lock"      // go-zookeeper's recipe: mutexes only
)

// session is one client session on one server and the locks it takes.
type session interface {
	// acquire takes path i's lock (its primitive decides which, r draws a
	// read/write lock's side) and returns its release and what it holds.
	acquire(ctx context.Context, i int, r *rand.Rand) (release func(context.Context) error, k kind, err error)
	close()
}

// connectSession opens one session of lib on the single server addr.
func connectSession(ctx context.Context, wc workerConfig, addr string) (session, error) {
	switch wc.Lib {
	case libZklock, libZklockNoOwn:
		c, err := zklock.Connect(ctx, []string{addr},
			zklock.WithSessionTimeout(wc.SessionTimeout),
			zklock.WithCleanupDelay(0), // the paths are reused: keep them
			zklock.WithOwnNodeWatch(wc.Lib == libZklock))
		if err != nil {
			return nil, err
		}
		return &zklockSession{c: c, wc: wc}, nil
	case libZkLock:
		conn, err := rawConn(ctx, []string{addr}, wc.SessionTimeout)
		if err != nil {
			return nil, err
		}
		return &zkLockSession{conn: conn, base: wc.Base}, nil
	}
	return nil, fmt.Errorf("zklock-scale: unknown library %q", wc.Lib)
}

type zklockSession struct {
	c  *zklock.Client
	wc workerConfig
}

func (s *zklockSession) acquire(ctx context.Context, i int, r *rand.Rand) (func(context.Context) error, kind, error) {
	p := pathName(s.wc.Base, i)
	var l *zklock.Lease
	var err error
	k := kindMutex
	switch primitiveOf(i, s.wc.MutexOnly) {
	case primMutex:
		var m *zklock.Mutex
		if m, err = s.c.NewMutex(p); err == nil {
			l, err = m.Acquire(ctx)
		}
	case primRW:
		var rw *zklock.RWMutex
		if rw, err = s.c.NewRWMutex(p); err == nil && r.Float64() < s.wc.ReadShare {
			k = kindRead
			l, err = rw.AcquireRead(ctx)
		} else if err == nil {
			k = kindWrite
			l, err = rw.AcquireWrite(ctx)
		}
	case primSemaphore:
		var sem *zklock.Semaphore
		k = kindPermit
		if sem, err = s.c.NewSemaphore(p, s.wc.Permits); err == nil {
			l, err = sem.Acquire(ctx)
		}
	}
	if err != nil {
		return nil, k, err
	}
	return l.Release, k, nil
}

func (s *zklockSession) close() { s.c.Close() }

type zkLockSession struct {
	conn *zk.Conn
	base string
}

// acquire takes go-zookeeper's zk.Lock, which has no deadline: ctx is not
// seen (the run's end waits for the queue instead).
func (s *zkLockSession) acquire(_ context.Context, i int, _ *rand.Rand) (func(context.Context) error, kind, error) {
	l := zk.NewLock(s.conn, pathName(s.base, i), zk.WorldACL(zk.PermAll))
	if err := l.Lock(); err != nil {
		return nil, kindMutex, err
	}
	return func(context.Context) error { return l.Unlock() }, kindMutex, nil
}

func (s *zkLockSession) close() { s.conn.Close() }

// rawConn is a go-zookeeper connection with a session.
func rawConn(ctx context.Context, addrs []string, timeout time.Duration) (*zk.Conn, error) {
	conn, err := benchkit.RawConn(ctx, addrs, timeout)
	if err != nil {
		return nil, fmt.Errorf("zklock-scale: connect to %v: %w", addrs, err)
	}
	return conn, nil
}
