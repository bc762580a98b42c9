package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// dataNode creates a node beside the lock for guarded writes to change.
func dataNode(t *testing.T, obs *zk.Conn, p string) string {
	t.Helper()
	node := p + "-data"
	_, err := obs.Create(node, []byte("v0"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	return node
}

func dataOf(t *testing.T, obs *zk.Conn, node string) string {
	t.Helper()
	data, _, err := obs.Get(node)
	require.NoError(t, err)
	return string(data)
}

// While the lease holds, a guarded write lands; a refused op of the caller's
// (a version that does not match) leaves the lease held and the data as it
// was, with ZooKeeper's error.
func TestGuardedWriteWhileHeld(t *testing.T) {
	t.Parallel()
	p, obs, _, l := holding(t)
	node := dataNode(t, obs, p)
	res, err := l.Multi(ctxTimeout(t, 5*time.Second), &zk.SetDataRequest{Path: node, Data: []byte("v1"), Version: 0})
	require.NoError(t, err)
	require.Len(t, res, 1, "only the caller's ops are answered")
	assert.Equal(t, int32(1), res[0].Stat.Version)
	assert.Equal(t, "v1", dataOf(t, obs, node))

	_, err = l.Multi(ctxTimeout(t, 5*time.Second), &zk.SetDataRequest{Path: node, Data: []byte("v2"), Version: 0})
	require.ErrorIs(t, err, zk.ErrBadVersion)
	require.NoError(t, l.Err(), "the lease still holds")
	assert.Equal(t, "v1", dataOf(t, obs, node))
}

// The interleaving a guarded write exists for: the holder decided to write
// (its lease held), then its node was deleted before the write reached
// ZooKeeper. The proxy holds the write until the delete has happened; the
// write is refused, the data unchanged, and the lease ends with the loss.
func TestGuardedWriteRefusedAfterNodeDeleted(t *testing.T) {
	t.Parallel()
	_, proxy, l, p := stalledHolder(t, 4*time.Second)
	obs := observer(t)
	node := dataNode(t, obs, p)
	require.NoError(t, l.Err(), "the decision: the lease holds")
	proxy.Stall()
	require.NoError(t, obs.Delete(l.Node(), -1))
	type out struct {
		res []zk.MultiResponse
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := l.Multi(context.Background(), &zk.SetDataRequest{Path: node, Data: []byte("late"), Version: -1})
		done <- out{res, err}
	}()
	time.Sleep(50 * time.Millisecond) // the request reaches the stalled proxy (no state to watch: it is held there)
	proxy.Resume()
	r := <-done
	require.ErrorIs(t, r.err, zklock.ErrLockLost)
	assert.Equal(t, "v0", dataOf(t, obs, node), "the write must not land")
	<-l.Done()
	require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
}

// The session expires between the decision and the write: the write is held
// in a stalled proxy past the session timeout. Multi returns with the loss
// by the loss deadline (its outcome unknown to the caller), and the data is
// unchanged once the connection heals: the check fails on the expired
// session's node.
func TestGuardedWriteNeverLandsAfterSessionExpiry(t *testing.T) {
	t.Parallel()
	const session = 2 * time.Second
	_, proxy, l, p := stalledHolder(t, session)
	obs := observer(t)
	node := dataNode(t, obs, p)
	require.NoError(t, l.Err())
	proxy.Stall()
	start := time.Now()
	_, err := l.Multi(context.Background(), &zk.SetDataRequest{Path: node, Data: []byte("late"), Version: -1})
	took := time.Since(start)
	// The connection drops (go-zookeeper's receive timeout, 2/3 of the
	// session) or the lease is presumed lost, whichever comes first: either
	// way the outcome is unknown to the caller.
	require.Error(t, err)
	require.True(t, errors.Is(err, zklock.ErrLockLost) || errors.Is(err, zklock.ErrUnreachable), "%v", err)
	require.Less(t, took, session*8/10+boundSlack, "Multi overran the loss deadline")
	waitGone(t, obs, l.Node()) // the server expired the session
	proxy.Resume()
	time.Sleep(200 * time.Millisecond) // let whatever the proxy held reach the server
	assert.Equal(t, "v0", dataOf(t, obs, node), "the write must not land")
	_, err = l.Multi(context.Background(), &zk.SetDataRequest{Path: node, Data: []byte("later"), Version: -1})
	require.ErrorIs(t, err, zklock.ErrLockLost, "an ended lease sends nothing")
	assert.Equal(t, "v0", dataOf(t, obs, node))
}

// A MultiLock lease guards with every part.
func TestGuardedWriteMultiLock(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	ml, err := connect(t).NewMultiLock(p+"/a", p+"/b")
	require.NoError(t, err)
	l, err := ml.Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	tokenOf(l)
	node := dataNode(t, obs, p)
	require.NoError(t, obs.Delete(l.Parts()[1].Node(), -1))
	<-l.Done()
	_, err = l.Multi(ctxTimeout(t, 5*time.Second), &zk.SetDataRequest{Path: node, Data: []byte("x"), Version: -1})
	require.ErrorIs(t, err, zklock.ErrLockLost)
	assert.Equal(t, "v0", dataOf(t, obs, node))
}
