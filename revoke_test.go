package zklock_test

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
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
	t.Parallel()
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
	host, _ := os.Hostname()
	assert.Equal(t, host, cs[0].Owner.Host, "the holder stays known beside the request")
	assert.Equal(t, os.Getpid(), cs[0].Owner.PID)
	assert.True(t, cs[0].Owner.Revoke)
}

// A request to a node that does not carry zklock's record (Curator's, here
// made by a raw connection) is Curator's own message, exactly, which a
// revocable Curator holder compares byte for byte; a zklock record is
// rewritten with its version, so a Proclaim in between is read again.
func TestRevokeWritesCuratorsMessageIntoForeignNodes(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	c := connect(t)
	require.NoError(t, zklock.EnsureParents(ctxTimeout(t, 5*time.Second), c, p))
	node, err := obs.Create(p+"/_c_0123456789abcdef0123456789abcdef-lock-", []byte("10.0.0.7"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	require.NoError(t, c.AskToRelease(ctxTimeout(t, 5*time.Second), node))
	data, _, err := obs.Get(node)
	require.NoError(t, err)
	require.Equal(t, "__REVOKE__", string(data))
}

// A request made while the node waits in the queue is heard once it holds.
func TestRevokeRequestedWhileWaiting(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	err = c.AskToRelease(ctxTimeout(t, 5*time.Second), ld.Lease().Node())
	require.ErrorIs(t, err, zklock.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "leader latch")
	now, err := e.Leader(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	assert.Equal(t, "id-1", now.Value)
	require.NoError(t, ld.Resign(ctxTimeout(t, 5*time.Second)))
}

// A MultiLock's lease hears a request to any of its parts.
func TestRevokeMultiLockPart(t *testing.T) {
	t.Parallel()
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

// A data change on a held node (here a request to release) uses up the
// own-node watch, and the monitor sets it again with one read. The
// interleaving: that read is in flight when the connection drops. The
// monitor must read again on the new connection (and take the request only
// from a read that succeeded), so the request is still heard and a later
// deletion of the node still ends the lease.
func TestRevokeHeardWhenTheRewatchReadIsLost(t *testing.T) {
	p := lockPath(t)
	obs := observer(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(testSession))
	l, err := mustMutex(t, c, p).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	tokenOf(l)

	cut := make(chan struct{})
	var once sync.Once
	zklock.SetHookRewatch(func() {
		once.Do(func() { go dropOnceRequestSent(proxy, len(l.Node()), cut) })
	})
	t.Cleanup(func() { zklock.SetHookRewatch(nil) })
	require.NoError(t, connect(t).AskToRelease(ctxTimeout(t, 5*time.Second), l.Node()))
	<-cut
	select {
	case <-l.RevokeRequested():
	case <-time.After(10 * time.Second):
		t.Fatal("the request was lost with the read that set the watch again")
	}
	require.NoError(t, l.Err())
	require.NoError(t, obs.Delete(l.Node(), -1))
	select {
	case <-l.Done():
		require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
	case <-time.After(10 * time.Second):
		t.Fatal("the node was deleted, and the lease goes on")
	}
}

// dropOnceRequestSent holds the servers' replies, waits until a request for
// a path of pathLen bytes has gone through the proxy, and cuts every
// connection: the request's reply is lost. Then it lets replies flow again.
func dropOnceRequestSent(proxy *zktest.Proxy, pathLen int, cut chan<- struct{}) {
	defer close(cut)
	sent, _ := proxy.Bytes()
	proxy.StallReplies()
	for { // length, xid, op, the path, the watch flag
		if now, _ := proxy.Bytes(); now >= sent+int64(4+8+4+pathLen+1) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	proxy.Cut()
	proxy.Resume()
}
