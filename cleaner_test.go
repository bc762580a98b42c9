package zklock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// cleanRoot creates a fresh persistent root for a cleaner test. The shared
// server keeps its default container check (a minute), so within a test only
// zklock's cleaner removes anything.
func cleanRoot(t *testing.T, obs *zk.Conn) string {
	root := fmt.Sprintf("/zklock-clean-%d", pathSeq.Add(1))
	_, err := obs.Create(root, nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	return root
}

func TestCleanerRemovesEmptyPathsBelowRoot(t *testing.T) {
	t.Parallel()
	obs := observer(t)
	root := cleanRoot(t, obs) + "/a"
	c := connect(t, zklock.WithCleanupRoot(root), zklock.WithCleanupDelay(100*time.Millisecond))
	m, err := c.NewMutex(root + "/b/c/lock1")
	require.NoError(t, err)
	l, err := m.Acquire(context.Background())
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))

	waitGone(t, obs, root+"/b")
	ok, _, err := obs.Exists(root)
	require.NoError(t, err)
	require.True(t, ok, "the cleanup root itself stays")
}

func TestCleanerKeepsPathsInUse(t *testing.T) {
	t.Parallel()
	obs := observer(t)
	root := cleanRoot(t, obs) + "/a"
	c := connect(t, zklock.WithCleanupRoot(root), zklock.WithCleanupDelay(50*time.Millisecond))
	_, err := obs.Create(root, nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, err = obs.Create(root+"/b", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, err = obs.Create(root+"/b/user-data", []byte("keep"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	sibling, err := c.NewMutex(root + "/b/sibling")
	require.NoError(t, err)
	held, err := sibling.Acquire(context.Background())
	require.NoError(t, err)
	m, err := c.NewMutex(root + "/b/c/lock1")
	require.NoError(t, err)
	l, err := m.Acquire(context.Background())
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))

	waitGone(t, obs, root+"/b/c")
	for _, p := range []string{root + "/b", root + "/b/sibling", root + "/b/user-data"} {
		ok, _, err := obs.Exists(p)
		require.NoError(t, err)
		require.True(t, ok, "%s is in use and must stay", p)
	}
	require.NoError(t, held.Release(context.Background()))
	waitGone(t, obs, root+"/b/sibling")
	ok, _, err := obs.Exists(root + "/b")
	require.NoError(t, err)
	require.True(t, ok, "user data keeps its parent")
}

// Each client's cleaner deletes only the nodes it created; a path another
// client created and used last is left to the server, which removes empty
// containers: this test runs its own server with a short container check.
func TestCleanerUnderContentionNeverFailsAWaiter(t *testing.T) {
	t.Parallel()
	zc := zktest.Start(t, zktest.WithContainerCheck(100*time.Millisecond))
	obs := zktest.Connect(t, zc.Addrs(), testSession).Conn
	root := cleanRoot(t, obs)
	count := func() int64 {
		m, err := zc.Mntr(0)
		require.NoError(t, err)
		return m.ZnodeCount()
	}
	znodes := count()
	paths := []string{root + "/x/shared", root + "/y/one", root + "/y/two"}
	const clients, cycles = 8, 15
	var inside [3]atomic.Int32
	var overlaps, acquired atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		c := connectVia(t, zc.Addrs(), zklock.WithSessionTimeout(testSession), zklock.WithCleanupRoot(root), zklock.WithCleanupDelay(time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < cycles; j++ {
				k := (i + j) % len(paths)
				if j%2 == 0 {
					k = 0 // half of all cycles fight over one path
				}
				m, err := c.NewMutex(paths[k])
				if !assert.NoError(t, err) {
					return
				}
				l, err := m.Acquire(ctxTimeout(t, 30*time.Second))
				if !assert.NoError(t, err, "the cleaner must never make an Acquire fail") {
					return
				}
				if inside[k].Add(1) != 1 {
					overlaps.Add(1)
				}
				inside[k].Add(-1)
				acquired.Add(1)
				assert.NoError(t, l.Release(context.Background()))
			}
		}()
	}
	wg.Wait()
	require.Zero(t, overlaps.Load())
	require.EqualValues(t, clients*cycles, acquired.Load())
	for _, p := range []string{root + "/x", root + "/y"} {
		waitGone(t, obs, p)
	}
	eventually(t, "znode count back to where it started", func() bool { return count() == znodes })
}

// The cleaner never deletes a node zklock did not create: a path another
// library made (kazoo's Lock creates its path once and fails without it)
// outlives zklock's use of it, while a path zklock made beside it goes.
// zklock creates paths with empty data, not null (kazoo's Semaphore reads a
// path's data).
func TestCleanerLeavesPathsItDidNotCreate(t *testing.T) {
	t.Parallel()
	obs := observer(t)
	root := cleanRoot(t, obs)
	theirs, mine := root+"/theirs", root+"/mine"
	_, err := obs.Create(theirs, []byte{}, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	c := connect(t, zklock.WithCleanupRoot(root), zklock.WithCleanupDelay(50*time.Millisecond))
	for _, p := range []string{theirs, mine} {
		l, err := mustMutex(t, c, p).Acquire(ctxTimeout(t, 10*time.Second))
		require.NoError(t, err)
		if p == mine {
			data, _, err := obs.Get(mine)
			require.NoError(t, err)
			assert.NotNil(t, data, "empty data, not null")
		}
		require.NoError(t, l.Release(context.Background()))
	}
	waitGone(t, obs, mine)
	ok, _, err := obs.Exists(theirs)
	require.NoError(t, err)
	assert.True(t, ok, "the cleaner deleted a path it did not create")
}

func TestTokenGrowsAcrossPathRecreation(t *testing.T) {
	t.Parallel()
	obs := observer(t)
	root := cleanRoot(t, obs)
	p := root + "/lock"
	c := connect(t, zklock.WithCleanupDelay(10*time.Millisecond))
	m, err := c.NewMutex(p)
	require.NoError(t, err)
	var last int64
	for i := 0; i < 3; i++ {
		l, err := m.Acquire(context.Background())
		require.NoError(t, err)
		require.Greater(t, tokenOf(l), last, "round %d", i)
		last = tokenOf(l)
		require.NoError(t, l.Release(context.Background()))
		waitGone(t, obs, p) // deleted by the cleaner, recreated by the next Acquire
	}
}

// Lock paths are container nodes: if the process goes away before its
// cleaner runs, the server removes them. This needs its own server with a
// short container check interval.
func TestContainersRemovedByServerWithoutCleaner(t *testing.T) {
	t.Parallel()
	zc := zktest.Start(t, zktest.WithContainerCheck(100*time.Millisecond))
	ctx := ctxTimeout(t, 30*time.Second)
	c, err := zklock.Connect(ctx, zc.Addrs(), zklock.WithCleanupDelay(0), zklock.WithSessionTimeout(testSession))
	require.NoError(t, err)
	m, err := c.NewMutex("/dead/process/lock")
	require.NoError(t, err)
	l, err := m.Acquire(ctx)
	require.NoError(t, err)
	_ = l // the process "dies" holding the lock: its session ends, no cleaner runs
	require.NoError(t, c.Close())

	obs := zktest.Connect(t, zc.Addrs(), testSession).Conn
	waitGone(t, obs, "/dead/process/lock")
	ok, _, err := obs.Exists("/dead/process")
	require.NoError(t, err)
	require.True(t, ok, "without a cleanup root, ancestors are persistent")
}

// A lock path that is the cleanup root itself is never removed: the root
// and everything above it stay. A sentinel lock path outside the root,
// released after it, tells when the root's cleanup has had its turn.
func TestCleanerNeverRemovesItsRoot(t *testing.T) {
	t.Parallel()
	obs := observer(t)
	root := cleanRoot(t, obs) + "/a"
	sentinel := root + "-sentinel"
	c := connect(t, zklock.WithCleanupRoot(root), zklock.WithCleanupDelay(50*time.Millisecond))
	for _, p := range []string{root, sentinel} {
		m, err := c.NewMutex(p)
		require.NoError(t, err)
		l, err := m.Acquire(context.Background())
		require.NoError(t, err)
		require.NoError(t, l.Release(context.Background()))
	}
	waitGone(t, obs, sentinel)
	ok, _, err := obs.Exists(root)
	require.NoError(t, err)
	require.True(t, ok, "the cleaner removed its own root")
}
