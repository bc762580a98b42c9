package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// grantKind is one acquiring call, reduced to what the grant tests need:
// take the lock at p on c, and hand back the lease it rests on.
type grantKind struct {
	name    string
	acquire func(ctx context.Context, c *zklock.Client, p string) (*zklock.Lease, error)
}

// acquireWith is the acquiring call of the Locker that mk makes.
func acquireWith(mk func(c *zklock.Client, p string) (zklock.Locker, error)) func(context.Context, *zklock.Client, string) (*zklock.Lease, error) {
	return func(ctx context.Context, c *zklock.Client, p string) (*zklock.Lease, error) {
		l, err := mk(c, p)
		if err != nil {
			return nil, err
		}
		return l.Acquire(ctx)
	}
}

// rwSide is one side of an RWMutex at p.
func rwSide(write bool) func(c *zklock.Client, p string) (zklock.Locker, error) {
	return func(c *zklock.Client, p string) (zklock.Locker, error) {
		rw, err := c.NewRWMutex(p)
		if err != nil {
			return nil, err
		}
		if write {
			return rw.Writer(), nil
		}
		return rw.Reader(), nil
	}
}

var grantKinds = []grantKind{
	{"mutex", acquireWith(func(c *zklock.Client, p string) (zklock.Locker, error) { return c.NewMutex(p) })},
	{"reentrant", acquireWith(func(c *zklock.Client, p string) (zklock.Locker, error) { return c.NewReentrantMutex(p) })},
	{"write", acquireWith(rwSide(true))},
	{"read", acquireWith(rwSide(false))},
	{"semaphore", acquireWith(func(c *zklock.Client, p string) (zklock.Locker, error) { return c.NewSemaphore(p, 1) })},
	{"multi", acquireWith(func(c *zklock.Client, p string) (zklock.Locker, error) { return c.NewMultiLock(p) })},
	{"campaign", func(ctx context.Context, c *zklock.Client, p string) (*zklock.Lease, error) {
		e, err := c.NewElection(p)
		if err != nil {
			return nil, err
		}
		ld, err := e.Campaign(ctx, "v")
		if err != nil {
			return nil, err
		}
		return ld.Lease(), nil
	}},
}

// stallUntilLossDue is a pause at the grant as it really comes: the
// waiter's link to ZooKeeper stalls right after its turn came, until the
// client must presume its leases lost, then heals a moment later, well
// inside the session timeout (the session lives).
func stallUntilLossDue(c *zklock.Client, proxy *zktest.Proxy) func() {
	return func() {
		proxy.Stall()
		deadline := time.Now().Add(10 * time.Second)
		for !zklock.LossDue(c) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		go func() {
			time.Sleep(100 * time.Millisecond) // the lease, on the old rule, is made in this window
			proxy.Resume()
		}()
	}
}

// A grant that comes while the client cannot prove its session to the
// leader waits, within the caller's ctx, for the leader's word and then
// grants a live lease; it never returns one whose Done is closed. Before
// this, every call returned (lease, nil) with Done closed and the node
// deleted: the caller ran its critical section beside the next holder.
func TestGrantAfterStallWaitsForTheLeader(t *testing.T) {
	t.Parallel()
	const session = 4 * time.Second
	for _, k := range grantKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel() // the hook is the client's own
			p := lockPath(t)
			proxy := zktest.NewProxy(t, cluster.Addrs()...)
			c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(session))
			obs := observer(t)
			zklock.SetHookBeforeLease(c, stallUntilLossDue(c, proxy))
			start := time.Now()
			l, err := k.acquire(ctxTimeout(t, 20*time.Second), c, p)
			zklock.SetHookBeforeLease(c, nil)
			require.NoError(t, err)
			require.False(t, zklock.LossDue(c), "granted while the loss rule says lost")
			select {
			case <-l.Done():
				t.Fatalf("a lease with Done closed was handed out: %v", l.Err())
			default:
			}
			require.NoError(t, l.Err())
			_, err = l.Token(ctxTimeout(t, 5*time.Second))
			require.NoError(t, err)
			ok, _, err := obs.Exists(l.Node())
			require.NoError(t, err)
			require.True(t, ok, "the granted node is still there")
			t.Logf("granted %v after the acquire began", time.Since(start).Round(time.Millisecond))
			require.NoError(t, l.Release(ctxTimeout(t, 5*time.Second)))
		})
	}
}

// slowLinkSession is the session timeout of the slow-link tests' client.
const slowLinkSession = 2 * time.Second

// slowLinkBehindAHolder holds a lock path p and returns, beside it, a client
// whose link to ZooKeeper is 300 ms each way (more than an eighth of its 2 s
// session), once the proof its connect made has grown too old to trust.
func slowLinkBehindAHolder(t *testing.T) (string, *zk.Conn, *zklock.Mutex, *zklock.Lease, *zklock.Client) {
	t.Helper()
	p := lockPath(t)
	obs := observer(t)
	holder := mustMutex(t, connect(t), p)
	h, err := holder.Acquire(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	proxy.SetDelay(slowLinkSession * 3 / 20)
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(slowLinkSession))
	eventually(t, "the connect's proof expired", func() bool { return zklock.LossDue(c) })
	return p, obs, holder, h, c
}

// A link slower than an eighth of the session timeout each way can never
// prove the session fresh enough to hold a lease (a proof is at least a
// proof gap and four one-way trips old). A waiter granted over it must not
// get a lease it already presumes lost: it waits for the leader's word
// until its ctx ends, then returns ErrUnreachable and removes its node.
// Before this, Acquire returned a lease born lost (Done closed, Err
// ErrLockLost) and Do ran fn on it.
func TestGrantOverASlowLinkIsUnreachableNotADeadLease(t *testing.T) {
	t.Parallel()
	p, obs, _, h, c := slowLinkBehindAHolder(t)
	m := mustMutex(t, c, p)
	ran := false
	done := make(chan error, 1)
	go func() {
		done <- m.Do(ctxTimeout(t, 3*time.Second), func(context.Context) error { ran = true; return nil })
	}()
	waitChildren(t, obs, p, 2)
	require.NoError(t, h.Release(ctxTimeout(t, 5*time.Second)))
	err := <-done
	require.ErrorIs(t, err, zklock.ErrUnreachable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, ran, "Do ran fn without a live lease")
	waitChildren(t, obs, p, 0)
}

// Token is a holder's claim: once the lease has ended it returns the end,
// not the number (before this it returned the create's zxid with a nil
// error on a lost or released lease).
func TestTokenOfAnEndedLeaseIsItsEnd(t *testing.T) {
	t.Parallel()
	_, obs, m, l := holding(t)
	_, err := l.Token(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	require.NoError(t, l.Release(ctxTimeout(t, 5*time.Second)))
	_, err = l.Token(context.Background())
	require.ErrorIs(t, err, zklock.ErrReleased)

	l, err = m.Acquire(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	_, err = l.Token(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	require.NoError(t, obs.Delete(l.Node(), -1))
	<-l.Done()
	_, err = l.Token(context.Background())
	require.ErrorIs(t, err, zklock.ErrLockLost)
	require.True(t, errors.Is(l.Err(), zklock.ErrLockLost))
}

// A client that cannot prove its session fresh enough (the slow link above)
// does not hold up the queue behind it: after a session timeout without the
// leader's word it gives its node up and queues again at the back, and the
// waiter behind it is granted. Before (with the gate but no bound), the
// waiter behind waited out its whole 15 s deadline.
func TestGrantOverASlowLinkLetsTheQueueMove(t *testing.T) {
	t.Parallel()
	const session = slowLinkSession
	p, obs, holder, h, slow := slowLinkBehindAHolder(t)
	slowDone := make(chan error, 1)
	go func() {
		_, err := mustMutex(t, slow, p).Acquire(ctxTimeout(t, 20*time.Second))
		slowDone <- err
	}()
	waitChildren(t, obs, p, 2)
	behind := make(chan error, 1)
	go func() {
		l, err := holder.Acquire(ctxTimeout(t, 15*time.Second))
		if err == nil {
			err = l.Release(context.Background())
		}
		behind <- err
	}()
	waitChildren(t, obs, p, 3)
	released := time.Now()
	require.NoError(t, h.Release(ctxTimeout(t, 5*time.Second)))
	require.NoError(t, <-behind, "the waiter behind the slow client is granted")
	took := time.Since(released)
	t.Logf("the waiter behind was granted %v after the release (session %v)", took.Round(time.Millisecond), session)
	require.Less(t, took, 2*session+2*time.Second, "within a session timeout and the give-up")
	// It never held it: its deadline ends its wait, or, when its last give-up
	// leaves no time to queue again, the unreachable leader does.
	slowErr := <-slowDone
	require.True(t, errors.Is(slowErr, context.DeadlineExceeded) || errors.Is(slowErr, zklock.ErrUnreachable), "the slow client never held it: %v", slowErr)
	waitChildren(t, obs, p, 0)
}
