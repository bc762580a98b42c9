package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

const testSession = 4 * time.Second

// quietSession is for tests that count the server's reads: a keep-alive
// ping counts as a read, and a long session timeout sends one every 10 s,
// not every 1.3 s, so a loaded machine cannot slip one into the count.
var quietSession = zklock.WithSessionTimeout(30 * time.Second)

// connect opens a Client on the shared server, closed when the test ends.
func connect(t testing.TB, opts ...zklock.Option) *zklock.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts = append([]zklock.Option{zklock.WithSessionTimeout(testSession)}, opts...)
	c, err := zklock.Connect(ctx, cluster.Addrs(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// observer opens a plain go-zookeeper connection for looking at the tree.
func observer(t testing.TB) *zk.Conn {
	t.Helper()
	return zktest.Connect(t, cluster.Addrs(), testSession).Conn
}

// rawConn opens a go-zookeeper connection and hands over its event channel
// (for NewClient), without waiting for a session; closed when the test ends.
func rawConn(t testing.TB, addrs []string, timeout time.Duration) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	conn, events, err := zk.Connect(addrs, timeout, zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false))
	require.NoError(t, err)
	t.Cleanup(conn.Close)
	return conn, events
}

var pathSeq atomic.Int64

// lockPath returns a lock path no other test uses.
func lockPath(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/zklock-test/%s-%d/lock", name, pathSeq.Add(1))
}

// lockChildren lists the lock nodes under p in queue order (none if p is missing).
func lockChildren(t testing.TB, conn *zk.Conn, p string) []string {
	t.Helper()
	children, _, err := conn.Children(p)
	if err == zk.ErrNoNode {
		return nil
	}
	require.NoError(t, err)
	slices.SortFunc(children, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
	return children
}

// waitChildren blocks until p has exactly n children, woken by child watches
// rather than polling on a timer.
func waitChildren(t testing.TB, conn *zk.Conn, p string, n int) []string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		children, _, ch, err := conn.ChildrenW(p)
		if err == zk.ErrNoNode {
			if n == 0 {
				return nil
			}
			var ech <-chan zk.Event
			_, _, ech, err = conn.ExistsW(p)
			require.NoError(t, err)
			select {
			case <-ech:
				continue
			case <-deadline:
				t.Fatalf("%s: never created, want %d children", p, n)
			}
		}
		require.NoError(t, err)
		if len(children) == n {
			return children
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s has %d children, want %d: %v", p, len(children), n, children)
		}
	}
}

// waitGone blocks until p no longer exists. conn may still be reconnecting
// (after a server restart): go-zookeeper fails a request queued while it
// tries the servers (ErrNoServer, ErrConnectionClosed), and the look is
// made again.
func waitGone(t testing.TB, conn *zk.Conn, p string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		ok, _, ch, err := conn.ExistsW(p)
		if errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrConnectionClosed) {
			select {
			case <-time.After(100 * time.Millisecond):
			case <-deadline:
				t.Fatalf("%s: no answer from ZooKeeper", p)
			}
			continue
		}
		require.NoError(t, err)
		if !ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s still exists", p)
		}
	}
}

func mntr(t testing.TB) zktest.Mntr {
	t.Helper()
	m, err := cluster.Mntr(0)
	require.NoError(t, err)
	return m
}

// eventually polls cond (for server counters, which have no watch) for up to
// 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, 10*time.Second, what, cond)
}

// eventuallyWithin polls cond for up to d.
func eventuallyWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// holding starts most lock tests: a fresh lock path, an observer connection,
// and a Mutex on a new client that already holds the lock.
func holding(t testing.TB) (string, *zk.Conn, *zklock.Mutex, *zklock.Lease) {
	t.Helper()
	p := lockPath(t)
	obs := observer(t)
	m, err := connect(t).NewMutex(p)
	require.NoError(t, err)
	l, err := m.Acquire(context.Background())
	require.NoError(t, err)
	return p, obs, m, l
}

// tokenOf returns l's fencing token, or 0 if it cannot be known (the lease
// ended first), once l's own-node read is done: its own-node watch is then
// in place (with Connect, the token itself comes off the create's reply).
func tokenOf(l *zklock.Lease) int64 {
	tok, _ := l.Token(context.Background())
	for _, p := range l.Parts() {
		select {
		case <-zklock.OwnReadDone(p):
		case <-p.Done():
		}
	}
	return tok
}

// mustMutex returns a Mutex of c on p.
func mustMutex(t testing.TB, c *zklock.Client, p string) *zklock.Mutex {
	t.Helper()
	m, err := c.NewMutex(p)
	require.NoError(t, err)
	return m
}

// connectVia opens a Client on the given addresses (a proxy, another cluster).
func connectVia(t testing.TB, addrs []string, opts ...zklock.Option) *zklock.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, addrs, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// cpuTime is the user and system CPU this test process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// tailBuffer keeps the last 64 KiB written to it (the service's stderr, a client's log).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 64<<10 {
		b.buf = b.buf[len(b.buf)-64<<10:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// isClosed reports whether ch is closed (or has a value ready).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
