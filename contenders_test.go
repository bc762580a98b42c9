package zklock_test

import (
	"context"
	"os"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

func TestContendersListsQueueInOrder(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	holderClient := connect(t)
	r, err := holderClient.NewReentrantMutex(p)
	require.NoError(t, err)
	held, err := r.Acquire(context.Background())
	require.NoError(t, err)

	// A go-zookeeper zk.Lock waiter, then a zklock waiter with a named owner.
	theirs := zk.NewLock(observer(t), p, zk.WorldACL(zk.PermAll))
	theirsDone := make(chan error, 1)
	go func() { theirsDone <- theirs.Lock() }()
	waitChildren(t, obs, p, 2)
	waiterClient := connect(t)
	wm, err := waiterClient.NewMutex(p)
	require.NoError(t, err)
	waiting := make(chan error, 1)
	go func() {
		l, err := wm.Acquire(zklock.ContextWithOwner(context.Background(), "batch"))
		if err == nil {
			err = l.Release(context.Background())
		}
		waiting <- err
	}()
	waitChildren(t, obs, p, 3)

	cs, err := holderClient.Contenders(context.Background(), p)
	require.NoError(t, err)
	require.Len(t, cs, 3)
	host, _ := os.Hostname()

	require.True(t, cs[0].Holder)
	require.Equal(t, held.Node(), cs[0].Node)
	require.Equal(t, tokenOf(held), cs[0].Token)
	require.Equal(t, host, cs[0].Owner.Host)
	require.Equal(t, os.Getpid(), cs[0].Owner.PID)
	require.Equal(t, holderClient.ID(), cs[0].Owner.Client)
	require.NotZero(t, cs[0].Owner.Goroutine)

	require.False(t, cs[1].Holder)
	require.Empty(t, cs[1].Owner.Client, "zk.Lock writes no owner record")
	require.Contains(t, cs[1].Node, "-lock-")

	require.Equal(t, "batch", cs[2].Owner.Name)
	require.Equal(t, waiterClient.ID(), cs[2].Owner.Client)
	require.Less(t, cs[0].Sequence, cs[1].Sequence)
	require.Less(t, cs[1].Sequence, cs[2].Sequence)

	require.NoError(t, r.Release(context.Background()))
	require.NoError(t, <-theirsDone)
	require.NoError(t, theirs.Unlock())
	require.NoError(t, <-waiting)

	cs, err = holderClient.Contenders(context.Background(), p)
	require.NoError(t, err)
	require.Empty(t, cs)
}
