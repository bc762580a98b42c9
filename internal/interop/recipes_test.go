package interop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// Paths that another recipe holds, which would not see or order zklock's
// node: the peer takes the path first, zklock arrives second and refuses
// with ErrIncompatible, naming the node and the recipe, and leaves no lock
// node of its own behind.

// refusal waits until the peer holds, then runs acquire and checks the
// refusal.
func refusal(t *testing.T, peer *proc, mention string, acquire func(context.Context) (*zklock.Lease, error)) {
	t.Helper()
	select {
	case <-peer.acquired:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s never held", peer.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := acquire(ctx)
	if l != nil {
		_ = l.Release(context.Background())
	}
	require.ErrorIs(t, err, zklock.ErrIncompatible, "zklock joined while %s held", peer.name)
	assert.Contains(t, err.Error(), mention)
}

// zklockNodes lists the lock nodes a zklock client with id left under p
// (recursively one level: a semaphore's locks and leases).
func zklockNodes(t *testing.T, conn *zk.Conn, p, id string) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{p, p + "/locks", p + "/leases"} {
		children, _, err := conn.Children(dir)
		if err != nil {
			continue
		}
		for _, c := range children {
			if strings.Contains(c, id) {
				out = append(out, dir+"/"+c)
			}
		}
	}
	return out
}

// Curator's InterProcessSemaphoreMutex holds (a semaphore's layout: locks
// and leases under the path); a zklock Mutex on the path refuses.
func TestRefuseCuratorSemaphoreMutex(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	p := newPath(t)
	cur := startJava(t, &record{}, "curator", p, "semmutex", 1, 60000)
	c := zklockClient(t)
	m, err := c.NewMutex(p)
	require.NoError(t, err)
	refusal(t, cur, "semaphore's layout", m.Acquire)
	assert.Empty(t, zklockNodes(t, observer(t), p, c.ID()))
}

// kazoo's Semaphore holds a lease (its leases live right under the path);
// zklock's Semaphore of the same N refuses instead of making a 4th holder
// of 3.
func TestRefuseKazooSemaphore(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	p := newPath(t)
	kz := startKazoo(t, &record{}, "kazoo", p, "semaphore:3", 1, 60000)
	c := zklockClient(t)
	s, err := c.NewSemaphore(p, 3)
	require.NoError(t, err)
	refusal(t, kz, "kazoo's Semaphore", s.Acquire)
	assert.Empty(t, zklockNodes(t, observer(t), p, c.ID()))
}

// Curator's InterProcessMutex holds; zklock's RWMutex writer refuses (each
// would sort the other's names wrongly). Curator's read/write writer holds;
// zklock's Mutex refuses.
func TestRefuseMixedMutexAndReadWrite(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	t.Run("curator mutex, zklock writer", func(t *testing.T) {
		p := newPath(t)
		cur := startJava(t, &record{}, "curator", p, "mutex", 1, 60000)
		c := zklockClient(t)
		rw, err := c.NewRWMutex(p)
		require.NoError(t, err)
		refusal(t, cur, "a mutex", rw.AcquireWrite)
		assert.Empty(t, zklockNodes(t, observer(t), p, c.ID()))
	})
	t.Run("curator writer, zklock mutex", func(t *testing.T) {
		p := newPath(t)
		cur := startJava(t, &record{}, "curator", p, "write", 1, 60000)
		c := zklockClient(t)
		m, err := c.NewMutex(p)
		require.NoError(t, err)
		refusal(t, cur, "a read/write lock", m.Acquire)
		assert.Empty(t, zklockNodes(t, observer(t), p, c.ID()))
	})
}

// zklock's MultiLock takes a then b; Curator's InterProcessMultiLock b then
// a. Without a deadline, 30 cycles each: both finish (zklock yields when it
// sees the cycle), and no one overlaps.
func TestMultiLockCycleWithCurator(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	base := newPath(t)
	a, b := base+"/a", base+"/b"
	const n = 30
	rec := &record{}
	cur := startJava(t, rec, "curator", b, "multi:"+a, n, holdMs)
	cur.waitReady(t)
	ml, err := zklockClient(t).NewMultiLock(b, a)
	require.NoError(t, err)
	g := runGo(rec, "zklock", false, n, holdMs*time.Millisecond, leaseTaker(ml.Acquire))
	cur.wait(t)
	g.wait(t)
	checkExclusive(t, rec, map[string]int{"curator": n, "zklock": n})
}

// A path zklock created has empty data, not null: kazoo's Semaphore, which
// reads a path's data as its limit, works there.
func TestKazooSemaphoreOnAZklockPath(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	p := newPath(t)
	m, err := zklockClient(t).NewMutex(p)
	require.NoError(t, err)
	l, err := m.Acquire(context.Background())
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))
	kz := startKazoo(t, &record{}, "kazoo", p, "leases", 0, 0)
	assert.Equal(t, "LEASES 0", outLine(t, kz))
	kz.wait(t)
	kz = startKazoo(t, &record{}, "kazoo", p, "semaphore:1", 1, 1)
	kz.wait(t)
}

// A path a kazoo Lock created outlives zklock's use of it: zklock's cleaner
// deletes only nodes its client created (a path zklock created beside it,
// the sentinel, goes).
func TestCleanerLeavesKazooPath(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	p := newPath(t)
	sentinel := p + "-sentinel"
	kz := startKazoo(t, &record{}, "kazoo", p, "mutex", 1, 1, "-lock-")
	kz.wait(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, servers, zklock.WithCleanupDelay(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	for _, path := range []string{p, sentinel} {
		m, err := c.NewMutex(path)
		require.NoError(t, err)
		l, err := m.Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	obs := observer(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, _, err := obs.Exists(sentinel)
		require.NoError(t, err)
		if !ok {
			break
		}
		require.True(t, time.Now().Before(deadline), "the sentinel was never cleaned")
		time.Sleep(20 * time.Millisecond) // the cleaner's delay; no watch fires for its turn
	}
	ok, _, err := obs.Exists(p)
	require.NoError(t, err)
	assert.True(t, ok, "zklock's cleaner deleted the path kazoo created")
}

// Curator's LeaderLatch leads (latch- nodes); a zklock Election without
// LatchNames (mutex nodes, as Curator's LeaderSelector) refuses the path.
func TestRefuseCuratorLeaderLatchWithoutLatchNames(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	p := newPath(t)
	cur := startJava(t, &record{}, "curator", p, "latch:curator", 1, 60000)
	c := zklockClient(t)
	e, err := c.NewElection(p)
	require.NoError(t, err)
	refusal(t, cur, "LeaderLatch", func(ctx context.Context) (*zklock.Lease, error) {
		l, err := e.Campaign(ctx, "zklock")
		if l == nil {
			return nil, err
		}
		return l.Lease(), err
	})
	assert.Empty(t, zklockNodes(t, observer(t), p, c.ID()))
}
