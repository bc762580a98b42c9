package zklock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// adminACL lets everyone create, read and write, but only "admin" delete:
// a client without the admin's digest cannot remove its own lock node.
func adminACL() []zk.ACL {
	return append(zk.WorldACL(zk.PermCreate|zk.PermRead|zk.PermWrite|zk.PermAdmin), zk.DigestACL(zk.PermAll, "admin", "secret")...)
}

// noDeletePath creates a lock path whose children only the admin can delete,
// and an observer logged in as the admin; the path is removed at the end.
func noDeletePath(t *testing.T) (string, *zk.Conn) {
	t.Helper()
	p := lockPath(t)
	obs := observer(t)
	require.NoError(t, obs.AddAuth("digest", []byte("admin:secret")))
	parts := strings.Split(p[1:], "/")
	for i := 1; i < len(parts); i++ {
		_, err := obs.Create("/"+strings.Join(parts[:i], "/"), nil, 0, zk.WorldACL(zk.PermAll))
		if err != zk.ErrNodeExists {
			require.NoError(t, err)
		}
	}
	_, err := obs.Create(p, nil, 0, adminACL())
	require.NoError(t, err)
	return p, obs
}

// A Release the server refuses leaves the lease held, and still watched: a
// later deletion of its node ends it at once.
func TestRefusedReleaseKeepsLeaseWatched(t *testing.T) {
	t.Parallel()
	p, obs := noDeletePath(t)
	m, err := connect(t, zklock.WithCleanupDelay(0)).NewMutex(p)
	require.NoError(t, err)
	l, err := m.Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NotZero(t, tokenOf(l))

	require.ErrorIs(t, l.Release(ctxTimeout(t, 10*time.Second)), zk.ErrNoAuth)
	require.NoError(t, l.Err(), "a refused release leaves the lease held")
	select {
	case <-l.Done():
		t.Fatal("Done closed after a refused release")
	default:
	}

	require.NoError(t, obs.Delete(l.Node(), -1))
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease did not notice its node's deletion after a refused release")
	}
	require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
}

// A waiter that gives up and cannot delete its node says which node it left.
func TestGiveUpNamesNodeLeftWhenDeleteRefused(t *testing.T) {
	t.Parallel()
	p, obs := noDeletePath(t)
	holder, err := connect(t).NewMutex(p)
	require.NoError(t, err)
	_, err = holder.Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)

	other, err := connect(t, zklock.WithCleanupTimeout(2*time.Second)).NewMutex(p)
	require.NoError(t, err)
	_, err = other.TryAcquire(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrLocked)
	require.ErrorIs(t, err, zk.ErrNoAuth)
	children := lockChildren(t, obs, p)
	require.Len(t, children, 2, "the refused node is still there")
	require.Contains(t, err.Error(), p+"/"+children[1], "the error names the node left behind")
}

// On a caller's connection (no wire clock) a lease is presumed lost while
// the connection is down: a grant that comes then waits for the connection
// to come back on the same session, and never hands out a lease born lost
// (TestGrantAfterStallWaitsForTheLeader has the wire clock's case).
func TestGrantAfterDropWaitsForTheSessionOnCallersConnection(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	conn, events := rawConn(t, []string{proxy.Addr()}, 4*time.Second)
	c, err := zklock.NewClient(conn, events)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	m, err := c.NewMutex(p)
	require.NoError(t, err)
	zklock.SetHookBeforeLease(c, func() {
		proxy.Block(true)
		proxy.Cut()
		for conn.State() == zk.StateHasSession {
			time.Sleep(time.Millisecond)
		}
		go func() {
			time.Sleep(100 * time.Millisecond) // the lease, on the old rule, is made in this window
			proxy.Block(false)
		}()
	})
	l, err := m.Acquire(ctxTimeout(t, 10*time.Second))
	zklock.SetHookBeforeLease(c, nil)
	require.NoError(t, err)
	select {
	case <-l.Done():
		t.Fatalf("a lease made while disconnected was handed out with Done closed: %v", l.Err())
	default:
	}
	require.NoError(t, l.Err())
	require.NoError(t, l.Release(ctxTimeout(t, 5*time.Second)))
}

// A holder cut off from ZooKeeper must learn that its lease is gone before
// anyone else can be granted the lock. Both moments are read from one
// monotonic clock in this process.
func TestPartitionedHolderLosesLeaseBeforeAnotherAcquires(t *testing.T) {
	t.Parallel()
	for _, timeout := range []time.Duration{time.Second, 1500 * time.Millisecond, 2 * time.Second} {
		t.Run(timeout.String(), func(t *testing.T) {
			p := lockPath(t)
			obs := observer(t)
			proxy := zktest.NewProxy(t, cluster.Addrs()...)
			holder := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(timeout))
			m, err := holder.NewMutex(p)
			require.NoError(t, err)
			l, err := m.Acquire(context.Background())
			require.NoError(t, err)

			other, err := connect(t).NewMutex(p)
			require.NoError(t, err)
			acquired := make(chan time.Time, 1)
			go func() {
				ol, err := other.Acquire(ctxTimeout(t, 30*time.Second))
				at := time.Now()
				if assert.NoError(t, err) {
					assert.NoError(t, ol.Release(context.Background()))
				}
				acquired <- at
			}()
			waitChildren(t, obs, p, 2)

			proxy.Stall()
			stalled := time.Now()
			<-l.Done()
			doneAt := time.Now()
			otherAt := <-acquired
			proxy.Resume()

			require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
			require.True(t, doneAt.Before(otherAt), "holder learned of the loss %v after the other acquired", doneAt.Sub(otherAt))
			t.Logf("session %v: lease lost %v after the stall, %v before the next holder",
				timeout, doneAt.Sub(stalled).Round(time.Millisecond), otherAt.Sub(doneAt).Round(time.Millisecond))
		})
	}
}

// A loss presumed while the session lives on (the holder's connection
// stalled past its deadline, then flowing again before the session could
// expire) keeps the holder's node until a whole session timeout after the
// leader's last word: the waiter is granted no sooner than a true expiry
// would let it, 0.2 T after the holder's deadline, the holder's time to
// stop (zklock exec kills its command by 0.9 T). Deleting the node at the
// loss let a waiter in while exec's command still ran.
func TestFalseLossKeepsTheNodeUntilTheSessionMayExpire(t *testing.T) {
	t.Parallel()
	const T = 2 * time.Second
	ctx := ctxTimeout(t, 30*time.Second)
	p := lockPath(t)
	obs := observer(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	holder := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(T))
	l, err := mustMutex(t, holder, p).Acquire(ctx)
	require.NoError(t, err)
	session := holder.Conn().SessionID()
	acquired := make(chan time.Time, 1)
	go func() {
		ol, err := mustMutex(t, connect(t), p).Acquire(ctx)
		acquired <- time.Now()
		if assert.NoError(t, err) {
			assert.NoError(t, ol.Release(context.Background()))
		}
	}()
	waitChildren(t, obs, p, 2)
	ended := make(chan leaseEnd, 1)
	go watchEnd(ctx, l, ended)
	proxy.Stall()
	end, ok := <-ended
	proxy.Resume() // well before the session can expire: it lives on
	require.True(t, ok, "the stall did not end the lease")
	require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
	grantAt := <-acquired
	require.False(t, grantAt.Before(end.deadline.Add(T/5)),
		"the waiter was granted %v after the holder's deadline, within its last 0.2 T", grantAt.Sub(end.deadline))
	eventually(t, "the holder's session answering again", func() bool {
		s := holder.State()
		return s == zklock.StateConnected || s == zklock.StateReconnected
	})
	require.Equal(t, session, holder.Conn().SessionID(), "the holder's session lived on (a false loss)")
	t.Logf("granted %v after the holder's Done, %v after its deadline", grantAt.Sub(end.at).Round(time.Millisecond),
		grantAt.Sub(end.deadline).Round(time.Millisecond))
}

func TestLeaseLostWhenNodeDeletedBySomeoneElse(t *testing.T) {
	t.Parallel()
	_, obs, _, l := holding(t)
	tokenOf(l) // the own-node watch is in place once the token is known
	require.NoError(t, obs.Delete(l.Node(), -1))
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the node was deleted")
	}
	require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
	require.ErrorIs(t, l.Release(context.Background()), zklock.ErrLockLost, "releasing a lost lease reports the loss")
}

func TestShortDisconnectKeepsLease(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second
	p := lockPath(t)
	obs := observer(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(timeout))
	m, err := c.NewMutex(p)
	require.NoError(t, err)
	l, err := m.Acquire(context.Background())
	require.NoError(t, err)
	tokenOf(l)

	// A stall well inside the deadline, then a reset connection: go-zookeeper
	// reconnects to the same session.
	proxy.Stall()
	time.Sleep(timeout / 5)
	proxy.Resume()
	proxy.Cut()
	select {
	case <-l.Done():
		t.Fatalf("lease ended after a short disconnect: %v", l.Err())
	case <-time.After(timeout):
	}
	require.NoError(t, l.Err())
	require.NoError(t, l.Release(ctxTimeout(t, 10*time.Second)))
	require.Empty(t, lockChildren(t, obs, p))
}

// A dropped connection to one address (a load balancer, a standalone
// server) is made again at once, not after the second go-zookeeper sleeps at
// the start of a round through its list: a lease whose loss window (80 % of
// a 1 s session) is shorter than that second keeps its lock.
func TestDroppedConnectionToOneAddressIsMadeAgainAtOnce(t *testing.T) {
	t.Parallel()
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(time.Second))
	l, err := mustMutex(t, c, lockPath(t)).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	tokenOf(l)
	accepted := proxy.Accepted()
	proxy.Cut()
	eventually(t, "a new connection on the session", func() bool {
		return proxy.Accepted() > accepted && c.Conn().State() == zk.StateHasSession
	})
	require.NoError(t, l.Err(), "the lease outlives the cut")
	require.NoError(t, l.Release(ctxTimeout(t, 10*time.Second)))
}

// A Release that finds its node already gone (an operator deleted it; with
// the own-node watch off nothing else noticed) reports the loss, and Err
// says the same: the critical section was not protected to the end.
func TestReleaseOfDeletedNodeReportsTheLoss(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	m, err := connect(t, zklock.WithOwnNodeWatch(false)).NewMutex(p)
	require.NoError(t, err)
	l, err := m.Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, obs.Delete(l.Node(), -1))

	err = l.Release(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrLockLost)
	require.ErrorIs(t, l.Err(), zklock.ErrLockLost, "Release and Err agree")
	require.ErrorIs(t, l.Release(context.Background()), zklock.ErrNotHeld)
}
