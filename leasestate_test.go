package zklock

import (
	"errors"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/internal/wire"
)

// newTestLease is a held lease whose node counts as removed already, on a
// client whose connection never connected (session id 0, like the lease's)
// and whose wire clock has just started: enough for the state machine, which
// talks to ZooKeeper only through removeNode.
func newTestLease(t *testing.T) *Lease {
	c := newClient(&zk.Conn{}, false, wire.New(wire.Config{}), defaultOptions())
	q := &queueNode{c: c, path: "/a", name: "n", node: "/a/n", sess: newSession(0), fetched: make(chan struct{})}
	q.removed.Store(true)
	l := newLeaseState(c)
	l.h = &nodeHolding{l: l, q: q, presumed: make(chan struct{})}
	c.leases[l] = struct{}{}
	t.Cleanup(func() {
		close(c.closing) // ends the client's loss clock
		c.wg.Wait()
	})
	return l
}

var errTestLoss = errors.New("test loss")

// Release and the loss monitor racing: whichever way it goes, Release's
// result and Err agree.
func TestPureLeaseReleaseAndLossAgree(t *testing.T) {
	t.Run("loss during a confirmed delete: released", func(t *testing.T) {
		l := newTestLease(t)
		require.NoError(t, l.beginRelease())
		l.lose(deletedByOther(l.Node())) // the own-node watch firing on our own delete
		require.False(t, isDone(l.done), "a node-deleted loss waits for the delete's outcome")
		require.NoError(t, l.endRelease(removedByUs))
		require.ErrorIs(t, l.err, ErrReleased)
	})
	t.Run("node gone before our delete: lost", func(t *testing.T) {
		l := newTestLease(t)
		require.NoError(t, l.beginRelease())
		require.ErrorIs(t, l.endRelease(removedByOther), ErrLockLost)
		require.ErrorIs(t, l.err, ErrLockLost)
	})
	t.Run("session over during the delete: lost", func(t *testing.T) {
		l := newTestLease(t)
		require.NoError(t, l.beginRelease())
		require.ErrorIs(t, l.endRelease(removedWithSession), ErrLockLost)
	})
	t.Run("other loss during a release: ends the lease at once, and Release reports it", func(t *testing.T) {
		l := newTestLease(t)
		require.NoError(t, l.beginRelease())
		l.lose(errTestLoss)
		require.True(t, isDone(l.done))
		require.ErrorIs(t, l.endRelease(removedByUs), errTestLoss)
		require.ErrorIs(t, l.err, errTestLoss)
	})
	t.Run("node-deleted loss during a refused delete: lost", func(t *testing.T) {
		l := newTestLease(t)
		require.NoError(t, l.beginRelease())
		l.lose(deletedByOther(l.Node()))
		refused := errors.New("refused")
		require.ErrorIs(t, l.refusedRelease(refused), refused)
		require.True(t, isDone(l.done))
		require.ErrorIs(t, l.err, ErrLockLost)
		require.ErrorIs(t, l.beginRelease(), ErrLockLost, "the next Release reports the loss once")
		require.ErrorIs(t, l.beginRelease(), ErrNotHeld)
	})
	t.Run("refused delete, no loss: still held", func(t *testing.T) {
		l := newTestLease(t)
		require.NoError(t, l.beginRelease())
		require.Error(t, l.refusedRelease(errors.New("refused")))
		require.True(t, l.held())
		require.False(t, isDone(l.done))
		l.lose(errTestLoss) // still watched: a later loss ends it
		require.ErrorIs(t, l.err, errTestLoss)
	})
	t.Run("loss first: Release reports it", func(t *testing.T) {
		l := newTestLease(t)
		l.lose(errTestLoss)
		require.ErrorIs(t, l.endRelease(removedByUs), errTestLoss, "a Release under way reports it too")
		l.errClaimed = false
		require.ErrorIs(t, l.beginRelease(), errTestLoss)
		require.ErrorIs(t, l.beginRelease(), ErrNotHeld)
	})
	t.Run("end hooks run before the lease is reported ended", func(t *testing.T) {
		l := newTestLease(t)
		var got error
		l.whenEnded(func(err error) { got = err })
		l.lose(errTestLoss)
		require.ErrorIs(t, got, errTestLoss)
		var late error
		l.whenEnded(func(err error) { late = err })
		require.ErrorIs(t, late, errTestLoss, "a hook added after the end runs at once")
	})
}
