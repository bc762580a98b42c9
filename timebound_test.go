package zklock_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// The time contract (README, "Time bounds"): one test per row, each with
// ZooKeeper cut off by a stalled proxy (bytes held, connection kept open: a
// partition or a paused server, the hardest case for a client to tell).

// boundSlack absorbs scheduling on a loaded 2-core machine under -race.
const boundSlack = 750 * time.Millisecond

// stalledHolder returns a client on a proxy holding a lease on a fresh path,
// with its own-node read done, and the proxy.
func stalledHolder(t *testing.T, session time.Duration, opts ...zklock.Option) (*zklock.Client, *zktest.Proxy, *zklock.Lease, string) {
	t.Helper()
	p := lockPath(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	c := connectVia(t, []string{proxy.Addr()}, append([]zklock.Option{zklock.WithSessionTimeout(session)}, opts...)...)
	l, err := mustMutex(t, c, p).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	tokenOf(l)
	return c, proxy, l, p
}

// Release(context.Background()) returns the loss by the time the lease must
// be presumed lost (80 % of the session timeout after the last word from the
// server), not when the delete could be confirmed; the delete goes on and
// the node is gone once the connection heals.
func TestBoundReleaseReturnsTheLossWhenZooKeeperIsCutOff(t *testing.T) {
	t.Parallel()
	const session = 2 * time.Second
	_, proxy, l, p := stalledHolder(t, session)
	obs := observer(t)
	proxy.Stall()
	start := time.Now()
	err := l.Release(context.Background())
	took := time.Since(start)
	require.ErrorIs(t, err, zklock.ErrLockLost)
	require.Less(t, took, session*8/10+boundSlack, "Release overran the loss deadline")
	require.ErrorIs(t, l.Release(context.Background()), zklock.ErrNotHeld)
	proxy.Resume()
	waitChildren(t, obs, p, 0) // the background delete, or the session's end
	t.Logf("Release returned the loss %v after the cut (session %v)", took.Round(time.Millisecond), session)
}

// An Acquire whose create goes unanswered returns at its deadline; the node,
// if the create made one, is removed in the background.
func TestBoundAcquireReturnsAtItsDeadlineWhenCutOff(t *testing.T) {
	t.Parallel()
	c, proxy, _, _ := stalledHolder(t, 4*time.Second)
	obs := observer(t)
	other := lockPath(t)
	proxy.Stall()
	const deadline = time.Second
	start := time.Now()
	_, err := mustMutex(t, c, other).Acquire(ctxTimeout(t, deadline))
	took := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, took, deadline+boundSlack, "Acquire overran its deadline")
	proxy.Resume()
	waitChildren(t, obs, other, 0)
	t.Logf("Acquire with a %v deadline returned after %v", deadline, took.Round(time.Millisecond))
}

// A waiter already queued whose deadline passes while ZooKeeper is cut off
// waits for its node's delete at most the cleanup timeout.
func TestBoundQueuedWaiterGivesUpWithinTheCleanupTimeout(t *testing.T) {
	t.Parallel()
	p, obs, _, _ := holding(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	const cleanup = 500 * time.Millisecond
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(4*time.Second), zklock.WithCleanupTimeout(cleanup))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { _, err := mustMutex(t, c, p).Acquire(ctx); errc <- err }()
	waitChildren(t, obs, p, 2)
	proxy.Stall()
	start := time.Now()
	cancel()
	err := <-errc
	took := time.Since(start)
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, took, cleanup+boundSlack, "give-up overran the cleanup timeout")
	proxy.Resume()
	waitChildren(t, obs, p, 1)
}

// With ZooKeeper answering, a cancelled waiter's node is gone when Acquire
// returns: the other half of "no orphan".
func TestBoundGiveUpRemovesTheNodeBeforeReturningWhenZooKeeperAnswers(t *testing.T) {
	t.Parallel()
	p, obs, _, _ := holding(t)
	m := mustMutex(t, connect(t), p)
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { _, err := m.Acquire(ctx); errc <- err }()
		waitChildren(t, obs, p, 2)
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
		require.Len(t, lockChildren(t, obs, p), 1, "the waiter's node outlived its Acquire")
	}
}

// TryAcquire never waits for ever: with ZooKeeper cut off it fails by the
// session timeout, as unreachable, never as ErrLocked.
func TestBoundTryAcquireWithBackgroundWhenCutOff(t *testing.T) {
	t.Parallel()
	const session = 2 * time.Second
	c, proxy, _, _ := stalledHolder(t, session)
	proxy.Stall()
	defer proxy.Resume()
	start := time.Now()
	_, err := mustMutex(t, c, lockPath(t)).TryAcquire(context.Background())
	took := time.Since(start)
	require.ErrorIs(t, err, zklock.ErrUnreachable)
	require.NotErrorIs(t, err, zklock.ErrLocked)
	require.Less(t, took, session+boundSlack, "TryAcquire overran the session timeout")
	t.Logf("TryAcquire gave up after %v: %v", took.Round(time.Millisecond), err)
}

// Close with nothing left to clean that the server will not clean (its only
// lease already lost) is prompt.
func TestBoundCloseAfterTheLeaseWasLost(t *testing.T) {
	t.Parallel()
	c, proxy, l, _ := stalledHolder(t, 2*time.Second)
	proxy.Stall()
	defer proxy.Resume()
	<-l.Done()
	start := time.Now()
	require.NoError(t, c.Close())
	took := time.Since(start)
	require.Less(t, took, time.Second+boundSlack, "Close waited on an unreachable server")
	t.Logf("Close took %v", took.Round(time.Millisecond))
}

// Connect with context.Background() ends at the connect timeout, with the
// cause: a refused port, an HTTP server, a silent one.
func TestBoundConnectNamesTheCause(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := ln.Addr().String()
	ln.Close()
	cases := map[string]struct{ addr, cause string }{
		"refused": {refused, "connection refused"},
		"http":    {garbageServer(t), "not ZooKeeper's"},
		"silent":  {silentServer(t), "never answered"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			const timeout = time.Second
			start := time.Now()
			_, err := zklock.Connect(context.Background(), []string{tc.addr}, zklock.WithConnectTimeout(timeout))
			took := time.Since(start)
			require.ErrorIs(t, err, zklock.ErrUnreachable)
			require.ErrorContains(t, err, tc.cause)
			require.ErrorContains(t, err, tc.addr)
			require.Less(t, took, timeout+connectBound) // go-zookeeper's Close of the attempt may take a second
		})
	}
}

// A malformed server list fails at once, before any dial.
func TestBoundConnectRefusesAMalformedListAtOnce(t *testing.T) {
	t.Parallel()
	for _, list := range [][]string{{"127.0.0.1:abc"}, {"a,,b"}, {""}, {"127.0.0.1:2181/app/"}, {"127.0.0.1:2181/zookeeper"}} {
		start := time.Now()
		_, err := zklock.Connect(context.Background(), list)
		require.ErrorIs(t, err, zklock.ErrInvalidOption, "%q", list)
		require.Less(t, time.Since(start), 100*time.Millisecond)
	}
}

// A follower lag that leaves no time to hold a lease is refused once the
// granted session timeout is known; a smaller one is taken.
func TestBoundFollowerLagCheckedAgainstTheGrantedTimeout(t *testing.T) {
	t.Parallel()
	_, err := zklock.Connect(ctxTimeout(t, 10*time.Second), cluster.Addrs(),
		zklock.WithSessionTimeout(4*time.Second), zklock.WithFollowerLag(2*time.Second))
	require.ErrorIs(t, err, zklock.ErrInvalidOption)
	require.ErrorContains(t, err, "follower lag")
	_, err = zklock.Connect(ctxTimeout(t, 10*time.Second), cluster.Addrs(),
		zklock.WithSessionTimeout(4*time.Second), zklock.WithFollowerLag(800*time.Millisecond))
	require.ErrorIs(t, err, zklock.ErrInvalidOption, "20 % of 4 s")
	c := connect(t, zklock.WithFollowerLag(500*time.Millisecond)) // 12.5 % of 4 s
	l, err := mustMutex(t, c, lockPath(t)).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, l.Err(), "a lease born lost")
	require.NoError(t, l.Release(context.Background()))
}

// Token and Contenders with context.Background() end too.
func TestBoundTokenAndContendersWhenCutOff(t *testing.T) {
	t.Parallel()
	const session = 2 * time.Second
	c, proxy, l, p := stalledHolder(t, session, zklock.WithOwnNodeWatch(false))
	proxy.Stall()
	defer proxy.Resume()
	start := time.Now()
	_, err := c.Contenders(context.Background(), p)
	require.ErrorIs(t, err, zklock.ErrUnreachable)
	require.Less(t, time.Since(start), session+boundSlack)
	_, err = l.Token(context.Background()) // without the own-node watch, a read
	require.True(t, errors.Is(err, zklock.ErrLockLost) || err == nil, "%v", err)
}
