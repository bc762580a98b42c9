package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// nextState reads the next session state, or fails.
func nextState(t *testing.T, ch <-chan zklock.SessionState) zklock.SessionState {
	t.Helper()
	select {
	case s, ok := <-ch:
		require.True(t, ok, "state channel closed")
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("no state change")
		return 0
	}
}

// A client cut off from ZooKeeper goes suspended (the connection drops),
// lost (the loss deadline passes), expired (the server expired the session,
// learnt on reconnecting) and reconnected (the new session), and closed at
// Close; its lease ends as it goes lost.
func TestSessionStatesThroughAnExpiry(t *testing.T) {
	t.Parallel()
	const session = 2 * time.Second
	p := lockPath(t)
	obs := observer(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(session))
	states := c.StateChanges(context.Background())
	require.Equal(t, zklock.StateConnected, nextState(t, states))
	assert.Equal(t, zklock.StateConnected, c.State())
	l, err := mustMutex(t, c, p).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	tokenOf(l)

	proxy.Block(true)
	proxy.Cut()
	require.Equal(t, zklock.StateSuspended, nextState(t, states))
	require.NoError(t, l.Err(), "suspended: the lease holds until the loss deadline")
	require.Equal(t, zklock.StateLost, nextState(t, states))
	require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
	waitGone(t, obs, l.Node()) // the server expired the session
	proxy.Block(false)
	require.Equal(t, zklock.StateExpired, nextState(t, states))
	require.Equal(t, zklock.StateReconnected, nextState(t, states))

	c.Close()
	require.Equal(t, zklock.StateClosed, nextState(t, states))
	_, ok := <-states
	assert.False(t, ok)
	assert.Equal(t, zklock.StateClosed, c.State())
}

// A short drop, healed within the session: suspended, then reconnected on
// the same session, the lease held throughout.
func TestSessionStatesShortDrop(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(4*time.Second))
	states := c.StateChanges(ctxTimeout(t, 30*time.Second))
	require.Equal(t, zklock.StateConnected, nextState(t, states))
	l, err := mustMutex(t, c, p).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	tokenOf(l)
	proxy.Cut()
	require.Equal(t, zklock.StateSuspended, nextState(t, states))
	require.Equal(t, zklock.StateReconnected, nextState(t, states))
	require.NoError(t, l.Err())
}

// The state machine, without a server: observations that make no sense
// from where the client is are ignored.
func TestPureSessionStateNames(t *testing.T) {
	for s, want := range map[zklock.SessionState]string{
		zklock.StateConnecting: "connecting", zklock.StateConnected: "connected", zklock.StateSuspended: "suspended",
		zklock.StateLost: "lost", zklock.StateExpired: "expired", zklock.StateReconnected: "reconnected",
		zklock.StateClosed: "closed", zklock.SessionState(99): "unknown",
	} {
		assert.Equal(t, want, s.String())
	}
}
