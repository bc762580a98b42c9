package zklock

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// newTestLease is a held lease whose node counts as removed already, on a
// client without a connection: enough for the state machine, which talks to
// ZooKeeper only through removeNode.
func newTestLease(t *testing.T) *Lease {
	c := newClient(nil, false, nil, defaultOptions())
	q := &queueNode{c: c, path: "/a", name: "n", sess: newSession(1), fetched: make(chan struct{})}
	q.removed.Store(true)
	l := &Lease{c: c, q: q, presumed: make(chan struct{}), done: make(chan struct{})}
	c.leases[l] = struct{}{}
	t.Cleanup(func() { c.wg.Wait() })
	return l
}

var errTestLoss = errors.New("test loss")

// Release and the loss monitor racing: whichever way it goes, Release's
// result and Err agree.
func TestPureLeaseReleaseAndLossAgree(t *testing.T) {
	t.Run("loss during a confirmed delete: released", func(t *testing.T) {
		l := newTestLease(t)
		require.NoError(t, l.beginRelease())
		l.lose(errTestLoss)
		require.False(t, isDone(l.done), "a loss waits for the delete's outcome")
		require.NoError(t, l.endRelease(nil))
		require.ErrorIs(t, l.err, ErrReleased)
	})
	t.Run("loss during a refused delete: lost", func(t *testing.T) {
		l := newTestLease(t)
		require.NoError(t, l.beginRelease())
		l.lose(errTestLoss)
		refused := errors.New("refused")
		require.ErrorIs(t, l.endRelease(refused), refused)
		require.True(t, isDone(l.done))
		require.ErrorIs(t, l.err, errTestLoss)
		require.ErrorIs(t, l.beginRelease(), errTestLoss, "the next Release reports the loss once")
		require.ErrorIs(t, l.beginRelease(), ErrNotHeld)
	})
	t.Run("refused delete, no loss: still held", func(t *testing.T) {
		l := newTestLease(t)
		require.NoError(t, l.beginRelease())
		require.Error(t, l.endRelease(errors.New("refused")))
		require.True(t, l.held())
		require.False(t, isDone(l.done))
		l.lose(errTestLoss) // still watched: a later loss ends it
		require.ErrorIs(t, l.err, errTestLoss)
	})
	t.Run("loss first: Release reports it", func(t *testing.T) {
		l := newTestLease(t)
		l.lose(errTestLoss)
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
