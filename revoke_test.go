package zklock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

func revoked(l *zklock.Lease) bool {
	select {
	case <-l.RevokeRequested():
		return true
	default:
		return false
	}
}

// A holder hears a request to release through the own-node watch it already
// has; Contenders shows the request; the lease itself goes on.
func TestRevokeHolderHearsTheRequest(t *testing.T) {
	p, _, _, l := holding(t)
	tokenOf(l)
	assert.False(t, revoked(l))
	asker := connect(t)
	require.NoError(t, asker.AskToRelease(ctxTimeout(t, 5*time.Second), l.Node()))
	select {
	case <-l.RevokeRequested():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder never heard the request")
	}
	require.NoError(t, l.Err(), "asking takes nothing")
	cs, err := asker.Contenders(ctxTimeout(t, 5*time.Second), p)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.True(t, cs[0].RevokeRequested)
	assert.True(t, cs[0].Holder)
}

// A request made while the node waits in the queue is heard once it holds.
func TestRevokeRequestedWhileWaiting(t *testing.T) {
	p, obs, _, holder := holding(t)
	waiter := make(chan *zklock.Lease, 1)
	go func() {
		l, err := mustMutex(t, connect(t), p).Acquire(ctxTimeout(t, 20*time.Second))
		assert.NoError(t, err)
		waiter <- l
	}()
	queued := waitChildren(t, obs, p, 2)
	asker := connect(t)
	var node string
	for _, n := range queued {
		if p+"/"+n != holder.Node() {
			node = p + "/" + n
		}
	}
	require.NoError(t, asker.AskToRelease(ctxTimeout(t, 5*time.Second), node))
	require.NoError(t, holder.Release(ctxTimeout(t, 5*time.Second)))
	l := <-waiter
	require.NotNil(t, l)
	select {
	case <-l.RevokeRequested():
	case <-time.After(10 * time.Second):
		t.Fatal("the new holder never heard the request made while it waited")
	}
	assert.False(t, revoked(holder))
}

// Asking refuses what is not a lock node (the lock path's own data, a
// semaphore's limit, must never be overwritten) and a leader latch's node,
// and says when the node is gone.
func TestRevokeBadNodes(t *testing.T) {
	p, _, _, l := holding(t)
	c := connect(t)
	require.ErrorIs(t, c.AskToRelease(ctxTimeout(t, 5*time.Second), p), zklock.ErrInvalidPath)
	require.ErrorIs(t, c.AskToRelease(ctxTimeout(t, 5*time.Second), "relative"), zklock.ErrInvalidPath)
	node := l.Node()
	require.NoError(t, l.Release(ctxTimeout(t, 5*time.Second)))
	err := c.AskToRelease(ctxTimeout(t, 5*time.Second), node)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "gone")

	// A leader latch has no revocation: its node keeps its data.
	e, err := c.NewElection(lockPath(t), zklock.LatchNames())
	require.NoError(t, err)
	ld, err := e.Campaign(ctxTimeout(t, 10*time.Second), "id-1")
	require.NoError(t, err)
	err = c.AskToRelease(ctxTimeout(t, 5*time.Second), ld.Node())
	require.ErrorIs(t, err, zklock.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "leader latch")
	now, err := e.Leader(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	assert.Equal(t, "id-1", now.Value)
	require.NoError(t, ld.Resign(ctxTimeout(t, 5*time.Second)))
}

// A MultiLock's lease hears a request to any of its parts.
func TestRevokeMultiLockPart(t *testing.T) {
	p := lockPath(t)
	ml, err := connect(t).NewMultiLock(p+"/a", p+"/b")
	require.NoError(t, err)
	l, err := ml.Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	tokenOf(l)
	require.NoError(t, connect(t).AskToRelease(ctxTimeout(t, 5*time.Second), l.Parts()[1].Node()))
	select {
	case <-l.RevokeRequested():
	case <-time.After(10 * time.Second):
		t.Fatal("the multi-lease never heard the request")
	}
}
