package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// The composite primitives keep the Lease contract of their parts.

// A MultiLock whose part's delete is refused is not reported released: the
// refused part stays held and watched, Done stays open, and Release can be
// tried again until it succeeds.
func TestMultiLockRefusedPartReleaseKeepsTheLeaseRetryable(t *testing.T) {
	t.Parallel()
	locked, obs := noDeletePath(t)
	free := lockPath(t)
	c := connect(t, zklock.WithCleanupDelay(0))
	l, err := multiOn(t, c, free, locked).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)

	err = l.Release(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zk.ErrNoAuth)
	require.NotErrorIs(t, l.Err(), zklock.ErrReleased, "a part still holds")
	require.ErrorContains(t, l.Err(), locked, "Err names the part that holds")
	select {
	case <-l.Done():
		t.Fatal("Done closed while a part still holds")
	default:
	}
	require.Len(t, lockChildren(t, obs, locked), 1)
	require.ErrorIs(t, l.Release(ctxTimeout(t, 10*time.Second)), zk.ErrNoAuth, "a second Release tries again")

	_, err = obs.SetACL(locked, zk.WorldACL(zk.PermAll), -1)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctxTimeout(t, 10*time.Second)))
	<-l.Done()
	require.ErrorIs(t, l.Err(), zklock.ErrReleased)
	require.Empty(t, lockChildren(t, obs, locked))
	require.ErrorIs(t, l.Release(context.Background()), zklock.ErrNotHeld)
}

// A MultiLock's lease that Close ended is not released by the caller.
func TestMultiLockReleaseAfterCloseIsNotHeld(t *testing.T) {
	t.Parallel()
	c := connect(t)
	l, err := multiOn(t, c, lockPath(t), lockPath(t)).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.ErrorIs(t, l.Release(context.Background()), zklock.ErrNotHeld)
}

// A semaphore whose turnstile delete is refused says so, naming the node,
// and leaves no lease behind.
func TestSemaphoreRefusedTurnstileDeleteIsReported(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	require.NoError(t, obs.AddAuth("digest", []byte("admin:secret")))
	createAll(t, obs, p)
	_, err := obs.Create(p+"/locks", nil, 0, adminACL())
	require.NoError(t, err)

	_, err = semOn(t, p, 2, zklock.WithCleanupDelay(0)).Acquire(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zk.ErrNoAuth)
	turnstile := lockChildren(t, obs, p+"/locks")
	require.Len(t, turnstile, 1, "the refused turnstile node stays")
	require.ErrorContains(t, err, p+"/locks/"+turnstile[0], "the error names it")
	require.Empty(t, lockChildren(t, obs, p+"/leases"), "no lease is left")
}

// A semaphore waiter that does not re-queue learns of its session's expiry
// as such, not as a deletion by someone else.
func TestSemaphoreWaiterWithoutRequeueSeesTheExpiry(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	held, err := semOn(t, p, 1).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	defer held.Release(context.Background())
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	s, err := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(time.Second), zklock.WithRequeueOnExpiry(false)).NewSemaphore(p, 1)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { _, err := s.Acquire(ctxTimeout(t, 30*time.Second)); errc <- err }()
	waitChildren(t, obs, p+"/leases", 2)
	proxy.Stall()
	waitChildren(t, obs, p+"/leases", 1) // the server expired the waiter's session
	proxy.Resume()
	err = <-errc
	require.ErrorIs(t, err, zklock.ErrSessionExpired)
	require.NotErrorIs(t, err, zklock.ErrQueueNodeDeleted)
}

// A turnstile deleted by someone else while its holder waits for a slot
// changes nothing for that waiter: its lease keeps its place, the client
// that takes the turnstile next queues behind it, and at most N hold.
func TestSemaphoreTurnstileDeletedWhileWaitingKeepsTheOrder(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	held, err := semOn(t, p, 1).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	first, second := semOn(t, p, 1), semOn(t, p, 1)
	order := make(chan string, 2)
	wait := func(s *zklock.Semaphore, name string) {
		l, err := s.Acquire(ctxTimeout(t, 30*time.Second))
		if err == nil {
			order <- name
			time.Sleep(50 * time.Millisecond)
			err = l.Release(context.Background())
		}
		if err != nil {
			order <- err.Error()
		}
	}
	go wait(first, "first")
	waitChildren(t, obs, p+"/leases", 2)
	turnstile := lockChildren(t, obs, p+"/locks")
	require.Len(t, turnstile, 1)
	require.NoError(t, obs.Delete(p+"/locks/"+turnstile[0], -1))
	go wait(second, "second")
	waitChildren(t, obs, p+"/leases", 3)
	require.NoError(t, held.Release(context.Background()))
	require.Equal(t, "first", <-order)
	require.Equal(t, "second", <-order)
}

// A stall between 80 % and 100 % of the session timeout presumes the
// turnstile lost, but the session survives and so does the waiter's place:
// it is served with the lease node it queued before the stall.
func TestSemaphoreWaiterKeepsItsPlaceThroughAStallItsSessionSurvives(t *testing.T) {
	t.Parallel()
	const session = 2 * time.Second
	p := lockPath(t)
	obs := observer(t)
	held, err := semOn(t, p, 1).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	s, err := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(session)).NewSemaphore(p, 1)
	require.NoError(t, err)
	got := make(chan *zklock.Lease, 1)
	go func() {
		l, err := s.Acquire(ctxTimeout(t, 30*time.Second))
		require.NoError(t, err)
		got <- l
	}()
	queued := waitChildren(t, obs, p+"/leases", 2)
	waiter := lockChildren(t, obs, p+"/leases")[1]
	require.Len(t, queued, 2)
	proxy.Stall()
	time.Sleep(session * 85 / 100)
	proxy.Resume()
	require.NoError(t, held.Release(context.Background()))
	l := <-got
	require.Equal(t, p+"/leases/"+waiter, l.Node(), "the waiter was sent to the back")
	require.NoError(t, l.Release(context.Background()))
}

// createAll creates p and its parents, open to all.
func createAll(t *testing.T, conn *zk.Conn, p string) {
	t.Helper()
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		_, err := conn.Create(p[:i], nil, 0, zk.WorldACL(zk.PermAll))
		if err != zk.ErrNodeExists {
			require.NoError(t, err)
		}
	}
}
