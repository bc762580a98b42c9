//go:build linux

package zklock_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// What operators do to a running ensemble, with holders holding and
// waiters waiting, on one ensemble in turn (a 3-server ensemble costs the
// suite seconds of CPU to start): a rolling restart, a member restored from
// an old backup, lossy links, a zxid counter that runs out (every leader
// starts 1000 short of its end, so the epoch rolls over all along), and a
// reconfig that moves the ensemble to new servers (reconfig_test.go).
func TestOperatorFaults(t *testing.T) {
	t.Parallel()
	zc := zktest.Start(t, zktest.WithEnsemble(3), zktest.WithReconfig(), zktest.WithInitialZxid(0xffffffff-1000))
	t.Run("rolling", func(t *testing.T) { rollingRestartEndsNoLease(t, zc) })
	t.Run("lagging", func(t *testing.T) { laggingFollowerRevivesNoLease(t, zc) })
	t.Run("loss", func(t *testing.T) { lossyLinksKeepExclusion(t, zc) })
	t.Run("rollover", func(t *testing.T) { tokensGrowAcrossZxidRollovers(t, zc) })
	t.Run("reconfig", func(t *testing.T) { clientsFollowAnEnsembleMovedByReconfig(t, zc) })
}

// heldQueue is a lock held by one client with two clients queued behind
// it, all on addrs with a 15 s session: what an operator's action must leave
// as it found it.
type heldQueue struct {
	p       string
	clients []*zklock.Client // the holder, then the two waiters
	lease   *zklock.Lease
	queue   []zklock.Contender // as queued, before the action
	granted chan *zklock.Lease // the waiters' leases, in the order granted
}

func newHeldQueue(t *testing.T, addrs []string) *heldQueue {
	q := &heldQueue{p: lockPath(t), granted: make(chan *zklock.Lease, 2)}
	holder := connectVia(t, addrs, operatorSession)
	var err error
	q.lease, err = mustMutex(t, holder, q.p).Acquire(ctxTimeout(t, 30*time.Second))
	require.NoError(t, err)
	q.clients = append(q.clients, holder)
	for i := range 2 {
		c := connectVia(t, addrs, operatorSession)
		q.clients = append(q.clients, c)
		w, ctx := mustMutex(t, c, q.p), ctxTimeout(t, 5*time.Minute)
		go func() {
			if wl, err := w.Acquire(ctx); err == nil {
				q.granted <- wl
			}
		}()
		eventually(t, "the waiter queued", func() bool { return len(contenders(t, holder, q.p)) == i+2 })
	}
	q.queue = contenders(t, holder, q.p)
	return q
}

// operatorSession is the session timeout of the clients an operator's
// action must not cost a lease: longer than an election takes.
var operatorSession = zklock.WithSessionTimeout(15 * time.Second)

// kept checks that the action left the holder its lease and the queue its
// order, then hands the lock down the queue.
func (q *heldQueue) kept(t *testing.T, action string) {
	require.NoError(t, q.lease.Err(), "the holder's lease ended in %s", action)
	require.Equal(t, q.queue, contenders(t, q.clients[0], q.p), "the queue changed in %s", action)
	require.NoError(t, q.lease.Release(ctxTimeout(t, 30*time.Second)))
	for range 2 {
		select {
		case wl := <-q.granted:
			require.NoError(t, wl.Release(ctxTimeout(t, 30*time.Second)))
		case <-time.After(30 * time.Second):
			t.Fatal("a waiter was not granted the lock after the holder released")
		}
	}
}

// cyclingClients are three clients on addrs that take and release a lock
// of their own over and over (contend) until stop.
func cyclingClients(t *testing.T, addrs []string) ([]*zklock.Client, *holders, func()) {
	var clients []*zklock.Client
	for range 3 {
		clients = append(clients, connectVia(t, addrs, operatorSession))
	}
	h := &holders{}
	h.explainOnFailure(t, clients)
	return clients, h, contend(t, clients, lockPath(t), h)
}

// rollingRestartEndsNoLease restarts every server in turn, the leader last,
// while one client holds and two wait: the holder keeps its lease, the
// queue keeps its order, and holders cycling on another path never overlap.
func rollingRestartEndsNoLease(t *testing.T, zc *zktest.Cluster) {
	q := newHeldQueue(t, zc.Addrs())
	_, h, stop := cyclingClients(t, zc.Addrs())
	require.NoError(t, zc.RollingRestart(ctxTimeout(t, 3*time.Minute), 500*time.Millisecond))
	stop()
	q.kept(t, "a rolling restart")
	require.Zero(t, h.overlaps, "two holders at once")
	require.Zero(t, h.shrinks, "a fencing token went backwards")
	t.Logf("%d grants on the cycling path, %d acquisitions timed out", h.granted, h.failed)
}

// laggingFollowerRevivesNoLease: a holder connected only to a follower; the
// follower is stopped and its data put back to a backup that still has the
// holder's node; meanwhile an operator deletes that node and another client
// takes the lock. When the holder's session resumes on the restored
// follower, its lease ends ("deleted by someone else"): the follower synced
// from the leader before serving, and the holder does not trust the node it
// had.
func laggingFollowerRevivesNoLease(t *testing.T, zc *zktest.Cluster) {
	f := followerOf(t, zc)
	proxy := zktest.NewProxy(t, f.Addr())
	p := lockPath(t)
	// T = 50 s: the loss clock (0.8 T) must not end the lease before the
	// restored follower serves, even on a loaded machine.
	holder := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(50*time.Second))
	l, err := mustMutex(t, holder, p).Acquire(ctxTimeout(t, 30*time.Second))
	require.NoError(t, err)
	backup, err := f.Checkpoint()
	require.NoError(t, err)
	require.NoError(t, f.Stop())
	stopped := time.Now()

	other := connectVia(t, othersThan(zc, f), zklock.WithSessionTimeout(15*time.Second))
	cs := contenders(t, other, p)
	require.Len(t, cs, 1)
	raw := zktest.Connect(t, othersThan(zc, f), 15*time.Second)
	require.NoError(t, raw.Delete(cs[0].Node, -1)) // the operator breaks the lock
	taken, err := mustMutex(t, other, p).Acquire(ctxTimeout(t, 30*time.Second))
	require.NoError(t, err)

	require.NoError(t, f.RestartFrom(ctxTimeout(t, 2*time.Minute), backup))
	select {
	case <-l.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the holder resumed on a restored follower and kept a lease the ensemble had ended")
	}
	require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
	require.Contains(t, l.Err().Error(), "deleted by someone else", "ended by the deletion, not the loss clock (%v after the stop)", time.Since(stopped))
	require.NoError(t, taken.Err())
	require.NoError(t, taken.Release(ctxTimeout(t, 30*time.Second)))
}

// lossyLinksKeepExclusion cycles holders while packets are lost at random:
// 10 % of every client's requests, 20 % of one follower's replies (one way
// only), 10 % of what the leader sends its followers. Exclusion holds,
// tokens grow, and the lock keeps changing hands.
func lossyLinksKeepExclusion(t *testing.T, zc *zktest.Cluster) {
	var clients []*zklock.Client
	for range 3 {
		clients = append(clients, connectVia(t, zc.Addrs(), zklock.WithSessionTimeout(8*time.Second)))
	}
	loss := zktest.NewLoss(t)
	leader, err := zc.Leader()
	require.NoError(t, err)
	for i, s := range zc.Servers() {
		require.NoError(t, loss.Drop(clientPort(t, s), zktest.ToPort, 10))
		if i == (leader+1)%3 {
			require.NoError(t, loss.Drop(clientPort(t, s), zktest.FromPort, 20))
		}
	}
	quorum, _ := zc.Servers()[leader].PeerPorts()
	require.NoError(t, loss.Drop(quorum, zktest.FromPort, 10))

	h := &holders{}
	h.explainOnFailure(t, clients)
	stop := contend(t, clients, lockPath(t), h)
	eventuallyWithin(t, time.Minute, "30 grants over lossy links", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.granted >= 30 })
	dropped, err := loss.Dropped()
	require.NoError(t, err)
	require.NoError(t, loss.Heal())
	stop()
	require.NotZero(t, dropped, "no packet was lost")
	require.Zero(t, h.overlaps, "two holders at once")
	require.Zero(t, h.shrinks, "a fencing token went backwards")
	t.Logf("%d grants, %d packets lost, %d acquisitions timed out (last: %v)", h.granted, dropped, h.failed, h.lastErr)
}

// tokensGrowAcrossZxidRollovers runs holders until the ensemble's epoch
// has rolled over twice (its leaders start their zxid counter 1000 short of
// the end: every 1000 or so transactions the leader steps down and a new
// epoch begins). Every later holder's token is larger (it is a creation
// zxid: the epoch is its high half), no two hold at once, and no node is
// left.
func tokensGrowAcrossZxidRollovers(t *testing.T, zc *zktest.Cluster) {
	var clients []*zklock.Client
	for range 3 {
		clients = append(clients, connectVia(t, zc.Addrs(), zklock.WithSessionTimeout(8*time.Second)))
	}
	p := lockPath(t)
	h := &holders{}
	h.explainOnFailure(t, clients)
	stop := contend(t, clients, p, h)
	epoch := func() int64 { h.mu.Lock(); defer h.mu.Unlock(); return h.lastToken >> 32 }
	eventually(t, "a first token", func() bool { return epoch() > 0 })
	first := epoch()
	eventuallyWithin(t, 2*time.Minute, "two rollovers", func() bool { return epoch() >= first+2 })
	stop()
	require.Zero(t, h.overlaps, "two holders at once")
	require.Zero(t, h.shrinks, "a fencing token went backwards across a rollover")
	require.Empty(t, contenders(t, clients[0], p), "orphan lock nodes")
	t.Logf("%d grants across epochs %d to %d, %d acquisitions timed out", h.granted, first, epoch(), h.failed)
}

// followerOf returns a server of zc that follows.
func followerOf(t *testing.T, zc *zktest.Cluster) *zktest.Server {
	leader, err := zc.Leader()
	require.NoError(t, err)
	return zc.Servers()[(leader+1)%len(zc.Servers())]
}

// othersThan is the addresses of zc's servers but s.
func othersThan(zc *zktest.Cluster, s *zktest.Server) []string {
	var addrs []string
	for _, o := range zc.Servers() {
		if o != s {
			addrs = append(addrs, o.Addr())
		}
	}
	return addrs
}

// clientPort is s's client port.
func clientPort(t *testing.T, s *zktest.Server) int {
	_, port, err := net.SplitHostPort(s.Addr())
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	return n
}

// contenders lists p's queue as c sees it.
func contenders(t *testing.T, c *zklock.Client, p string) []zklock.Contender {
	cs, err := c.Contenders(context.Background(), p)
	require.NoError(t, err)
	return cs
}
