package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// A peer that takes paths in the other order (as Curator's
// InterProcessMultiLock may): it holds b and queues on a, which the
// MultiLock holds while it waits for b. The MultiLock sees the cycle,
// yields a, and queues again; the peer gets a, finishes, and the MultiLock
// gets both. No deadline anywhere: without the yield both wait for ever.
func TestMultiLockYieldsToBreakACycle(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	a, b := p+"/a", p+"/b"
	obs := observer(t)
	peer := observer(t)
	peerB := zk.NewLock(peer, b, zk.WorldACL(zk.PermAll))
	require.NoError(t, peerB.Lock())

	rec := &recorder{}
	ml, err := connect(t, zklock.WithMetrics(rec)).NewMultiLock(b, a) // taken as a, then b
	require.NoError(t, err)
	got := make(chan *zklock.Lease, 1)
	go func() {
		l, err := ml.Acquire(context.Background())
		assert.NoError(t, err)
		got <- l
	}()
	waitChildren(t, obs, b, 2) // the MultiLock holds a and waits for b

	peerA := zk.NewLock(peer, a, zk.WorldACL(zk.PermAll))
	peerDone := make(chan error, 1)
	go func() {
		err := peerA.Lock() // queues behind the MultiLock: the cycle
		if err == nil {
			err = peerA.Unlock()
		}
		if uerr := peerB.Unlock(); err == nil {
			err = uerr
		}
		peerDone <- err
	}()
	select {
	case err := <-peerDone:
		require.NoError(t, err, "the peer got a once the MultiLock yielded")
	case <-time.After(20 * time.Second):
		t.Fatal("deadlock: the MultiLock never yielded")
	}
	l := <-got
	require.NotNil(t, l)
	require.NoError(t, l.Release(context.Background()))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.yields, 1)
	assert.Equal(t, []string{a, b}, rec.yields[0])
}

// No cycle, no yield: the MultiLock holds a and waits for b, whose holder
// is not queued on a (another client is), for several looks of the check.
func TestMultiLockNoYieldWithoutCycle(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	a, b := p+"/a", p+"/b"
	rec := &recorder{}
	obs := observer(t)
	holderB, err := mustMutex(t, connect(t), b).Acquire(context.Background())
	require.NoError(t, err)
	ml, err := connect(t, zklock.WithMetrics(rec)).NewMultiLock(a, b)
	require.NoError(t, err)
	got := make(chan *zklock.Lease, 1)
	go func() {
		l, err := ml.Acquire(context.Background())
		assert.NoError(t, err)
		got <- l
	}()
	waitChildren(t, obs, b, 2)
	behind := make(chan *zklock.Lease, 1)
	go func() {
		l, err := mustMutex(t, connect(t), a).Acquire(context.Background())
		assert.NoError(t, err)
		behind <- l
	}()
	waitChildren(t, obs, a, 2)
	time.Sleep(1500 * time.Millisecond) // three looks of the cycle check: nothing to wait for in ZooKeeper
	require.NoError(t, holderB.Release(context.Background()))
	l := <-got
	require.NoError(t, l.Release(context.Background()))
	require.NoError(t, (<-behind).Release(context.Background()))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Empty(t, rec.yields)
}
