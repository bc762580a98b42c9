package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

func TestMutexExcludesUnderContention(t *testing.T) {
	t.Parallel()
	const clients, cycles = 16, 20
	p := lockPath(t)
	var inside, overlaps, acquired atomic.Int64
	var tokMu sync.Mutex
	var lastToken int64
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		m, err := connect(t).NewMutex(p)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for j := 0; j < cycles; j++ {
				l, err := m.Acquire(ctx)
				if !assert.NoError(t, err) {
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				tok := tokenOf(l)
				tokMu.Lock()
				assert.Greater(t, tok, lastToken, "fencing token must grow with every holder")
				lastToken = tok
				tokMu.Unlock()
				time.Sleep(200 * time.Microsecond) // a critical section long enough to overlap if the lock were broken
				inside.Add(-1)
				acquired.Add(1)
				assert.NoError(t, l.Release(ctx))
			}
		}()
	}
	wg.Wait()
	require.Zero(t, overlaps.Load(), "two holders at once")
	require.EqualValues(t, clients*cycles, acquired.Load())
	require.Empty(t, lockChildren(t, observer(t), p), "nodes left behind")
}

// queueWaiters starts n waiters, each on its own client, one at a time: the
// next starts only once the previous one's node is seen in ZooKeeper, so the
// queue order is known. Each reports on its channel when it holds the lock and
// releases when its release channel is closed.
type waiterProc struct {
	got     chan *zklock.Lease
	release chan struct{}
	errc    chan error
}

func queueWaiters(t *testing.T, obs *zk.Conn, p string, already, n int) []*waiterProc {
	t.Helper()
	var ws []*waiterProc
	for i := 0; i < n; i++ {
		m, err := connect(t).NewMutex(p)
		require.NoError(t, err)
		w := &waiterProc{got: make(chan *zklock.Lease, 1), release: make(chan struct{}), errc: make(chan error, 1)}
		go func() {
			l, err := m.Acquire(context.Background())
			if err != nil {
				w.errc <- err
				return
			}
			w.got <- l
			<-w.release
			w.errc <- l.Release(context.Background())
		}()
		waitChildren(t, obs, p, already+i+1)
		ws = append(ws, w)
	}
	return ws
}

func TestMutexServesInArrivalOrder(t *testing.T) {
	t.Parallel()
	p, obs, _, holder := holding(t)

	// Each waiter joins only once the previous one's node is in ZooKeeper, and
	// records its number while it holds the lock.
	const n = 6
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wm, err := connect(t).NewMutex(p)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := wm.Acquire(context.Background())
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			assert.NoError(t, l.Release(context.Background()))
		}()
		waitChildren(t, obs, p, i+2)
	}
	require.NoError(t, holder.Release(context.Background()))
	wg.Wait()
	require.Equal(t, []int{0, 1, 2, 3, 4, 5}, order)
}

// One release wakes one waiter: with five queued, the holder's release fires
// exactly two watches (the holder's watch on its own node and the next
// waiter's watch on it), and no watch is left on the server afterwards.
func TestMutexReleaseWakesExactlyOneWaiter(t *testing.T) {
	p, obs, _, holder := holding(t)
	tokenOf(holder) // the own-node watch is set
	const n = 5
	ws := queueWaiters(t, obs, p, 1, n)
	obs.Close() // its child watches would fire too

	before := mntr(t)
	require.NoError(t, holder.Release(context.Background()))
	next := <-ws[0].got
	tokenOf(next)
	after := mntr(t)
	require.EqualValues(t, 2, zktest.WatchEventsFired(before, after), "watch events fired by one release")
	for _, w := range ws[1:] {
		select {
		case <-w.got:
			t.Fatal("a waiter other than the next one got the lock")
		default:
		}
	}
	for i, w := range ws {
		close(w.release)
		require.NoError(t, <-w.errc)
		if i+1 < len(ws) {
			<-ws[i+1].got
		}
	}
	require.Empty(t, lockChildren(t, observer(t), p))
	eventually(t, "server watch count back to zero", func() bool { return mntr(t).WatchCount() == 0 })
}

func TestAcquireTimeoutRemovesNodeAndQueueMoves(t *testing.T) {
	t.Parallel()
	p, obs, _, holder := holding(t)

	timedOut := make(chan error, 1)
	var took time.Duration
	m2, err := connect(t).NewMutex(p)
	require.NoError(t, err)
	const wait = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	start := time.Now()
	go func() {
		_, err := m2.Acquire(ctx)
		took = time.Since(start)
		timedOut <- err
	}()
	waitChildren(t, obs, p, 2)
	ws := queueWaiters(t, obs, p, 2, 1) // a third contender queues behind the one that will time out

	err = <-timedOut
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, took, wait+time.Second, "Acquire overran its deadline")
	require.Len(t, lockChildren(t, obs, p), 2, "the timed-out waiter's node must be gone when Acquire returns")

	require.NoError(t, holder.Release(context.Background()))
	select {
	case <-ws[0].got:
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter behind the timed-out one never got the lock")
	}
	close(ws[0].release)
	require.NoError(t, <-ws[0].errc)
}

func TestAcquireCancelRemovesNode(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	c := connect(t)
	m, err := c.NewMutex(p)
	require.NoError(t, err)
	holder, err := m.Acquire(context.Background())
	require.NoError(t, err)
	defer holder.Release(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := m.Acquire(ctx); errc <- err }()
	waitChildren(t, obs, p, 2)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	require.Len(t, lockChildren(t, obs, p), 1)
}

func TestTryAcquire(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	m, err := connect(t).NewMutex(p)
	require.NoError(t, err)
	other, err := connect(t).NewMutex(p)
	require.NoError(t, err)

	l, err := m.TryAcquire(context.Background())
	require.NoError(t, err, "a free lock is taken")

	_, err = other.TryAcquire(context.Background())
	require.ErrorIs(t, err, zklock.ErrLocked)
	require.Len(t, lockChildren(t, obs, p), 1, "a failed TryAcquire leaves nothing")

	// Someone waiting ahead also counts, even after the holder leaves.
	ws := queueWaiters(t, obs, p, 1, 1)
	_, err = other.TryAcquire(context.Background())
	require.ErrorIs(t, err, zklock.ErrLocked)
	require.NoError(t, l.Release(context.Background()))
	<-ws[0].got
	close(ws[0].release)
	require.NoError(t, <-ws[0].errc)

	l, err = other.TryAcquire(context.Background())
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))
}

func TestLeaseLifecycle(t *testing.T) {
	t.Parallel()
	p, obs, m, l := holding(t)
	require.NoError(t, l.Err())
	select {
	case <-l.Done():
		t.Fatal("Done closed while held")
	default:
	}
	require.Equal(t, []string{l.Node()[len(p)+1:]}, lockChildren(t, obs, p))
	_, stat, err := obs.Get(l.Node())
	require.NoError(t, err)
	require.Equal(t, stat.Czxid, tokenOf(l), "the token is the node's creation zxid")

	require.NoError(t, l.Release(context.Background()))
	<-l.Done()
	require.ErrorIs(t, l.Err(), zklock.ErrReleased)
	require.ErrorIs(t, l.Release(context.Background()), zklock.ErrNotHeld)
	require.Empty(t, lockChildren(t, obs, p))

	l2, err := m.Acquire(context.Background())
	require.NoError(t, err)
	require.Greater(t, tokenOf(l2), stat.Czxid)
	require.NoError(t, l2.Release(context.Background()))
}

func TestCloseEndsWaitersAndLeases(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	holderClient := connect(t)
	hm, err := holderClient.NewMutex(p)
	require.NoError(t, err)
	held, err := hm.Acquire(context.Background())
	require.NoError(t, err)

	c := connect(t)
	m, err := c.NewMutex(p)
	require.NoError(t, err)
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() { _, err := m.Acquire(context.Background()); errs <- err }()
		waitChildren(t, obs, p, 2+i)
	}
	require.NoError(t, c.Close())
	for i := 0; i < 3; i++ {
		require.ErrorIs(t, <-errs, zklock.ErrClosed)
	}
	require.Len(t, lockChildren(t, obs, p), 1, "Close removes its queue nodes")
	require.NoError(t, c.Close(), "Close is idempotent")

	_, err = m.Acquire(context.Background())
	require.ErrorIs(t, err, zklock.ErrClosed)
	_, err = m.TryAcquire(context.Background())
	require.ErrorIs(t, err, zklock.ErrClosed)

	require.NoError(t, holderClient.Close())
	<-held.Done()
	require.ErrorIs(t, held.Err(), zklock.ErrClosed)
	require.Empty(t, lockChildren(t, obs, p), "Close releases the leases it holds")
	require.ErrorIs(t, held.Release(context.Background()), zklock.ErrNotHeld)
}

func TestInvalidPaths(t *testing.T) {
	t.Parallel()
	c := connect(t)
	for _, p := range []string{
		"", "lock", "relative/lock", "/", "/locks/", "/a//b", "/a/./b", "/a/../b", "/a/.", "/a/..",
		"/bad\x00null", "/tab\there", "/del\x7f", "/zookeeper", "/zookeeper/quota/x", "/surrogate\ufff5",
	} {
		_, err := c.NewMutex(p)
		require.ErrorIs(t, err, zklock.ErrInvalidPath, "path %q", p)
		require.Contains(t, err.Error(), "zklock:")
	}
	for _, p := range []string{"/a", "/locks/job-1", "/zookeeper-not-reserved/x", "/a.b/c..d", "/ünïcode/lock"} {
		_, err := c.NewMutex(p)
		require.NoError(t, err, "path %q", p)
	}
}

func TestForeignChildrenAreRefused(t *testing.T) {
	t.Parallel()
	p, obs, m, l := holding(t)
	require.NoError(t, l.Release(context.Background()))
	_, err := obs.Create(p+"/config", []byte("x"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	_, err = m.Acquire(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrIncompatible, "a child no recipe names (kazoo's semaphore leases look so) is not shared")
	require.ErrorContains(t, err, p+" holds config")
	assert.Equal(t, []string{"config"}, lockChildren(t, obs, p), "no node left behind")
}

// go-zookeeper's zk.Lock uses the same node names, so each side waits for the other.
func TestInteropWithGoZookeeperLock(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	raw := observer(t)
	theirs := zk.NewLock(raw, p, zk.WorldACL(zk.PermAll))
	m, err := connect(t).NewMutex(p)
	require.NoError(t, err)

	// They hold; we wait.
	require.NoError(t, theirs.Lock())
	_, err = m.TryAcquire(context.Background())
	require.ErrorIs(t, err, zklock.ErrLocked)
	got := make(chan *zklock.Lease, 1)
	go func() {
		l, err := m.Acquire(context.Background())
		assert.NoError(t, err)
		got <- l
	}()
	waitChildren(t, obs, p, 2)
	select {
	case <-got:
		t.Fatal("acquired while zk.Lock holds")
	default:
	}
	require.NoError(t, theirs.Unlock())
	l := <-got

	// We hold; they wait.
	theirsDone := make(chan error, 1)
	go func() { theirsDone <- theirs.Lock() }()
	waitChildren(t, obs, p, 2)
	select {
	case <-theirsDone:
		t.Fatal("zk.Lock acquired while zklock holds")
	default:
	}
	require.NoError(t, l.Release(context.Background()))
	require.NoError(t, <-theirsDone)
	require.NoError(t, theirs.Unlock())
}

// kazoo's lock nodes ("<id>__lock__<seq>") count as contenders.
func TestKazooNodesCount(t *testing.T) {
	t.Parallel()
	p, obs, m, l := holding(t)
	require.NoError(t, l.Release(context.Background()))
	kazoo, err := obs.Create(p+"/abc123__lock__", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, err = m.TryAcquire(context.Background())
	require.ErrorIs(t, err, zklock.ErrLocked)
	require.NoError(t, obs.Delete(kazoo, -1))
	l, err = m.TryAcquire(context.Background())
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))
}

func TestErrorsWrapZooKeeperErrors(t *testing.T) {
	t.Parallel()
	// A digest ACL that the second client cannot pass.
	p := lockPath(t)
	acl := zk.DigestACL(zk.PermAll, "alice", "secret")
	owner := connect(t, zklock.WithDigestAuth("alice", "secret"), zklock.WithACL(acl))
	m, err := owner.NewMutex(p)
	require.NoError(t, err)
	l, err := m.Acquire(context.Background())
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))

	stranger, err := connect(t).NewMutex(p)
	require.NoError(t, err)
	_, err = stranger.Acquire(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zk.ErrNoAuth)
	require.True(t, errors.Is(err, zk.ErrNoAuth) && err.Error() != zk.ErrNoAuth.Error(), "wrapped with context: %v", err)
}

// The request budget, counted by the server: per uncontended acquisition and
// release, 2 writes (create, delete), 1 read (the listing pipelined with the
// create, whose child watch is the holder's watch: the path was taken at once
// twice before), and 1 watch event (that watch, fired by the delete). The
// token comes with the create's reply.
func TestRequestCostUncontended(t *testing.T) {
	p := lockPath(t)
	m, err := connect(t, zklock.WithCleanupDelay(0), quietSession).NewMutex(p)
	require.NoError(t, err)
	for range 2 { // creates the parents; twice at once, so the next are expected at once
		l, err := m.Acquire(context.Background())
		require.NoError(t, err)
		tokenOf(l) // its background own-node read is done before the count
		require.NoError(t, l.Release(context.Background()))
	}

	const n = 20
	before := mntr(t)
	for i := 0; i < n; i++ {
		l, err := m.Acquire(context.Background())
		require.NoError(t, err)
		tokenOf(l)
		require.NoError(t, l.Release(context.Background()))
	}
	after := mntr(t)
	require.EqualValues(t, 2*n, after.Int("zk_cnt_updatelatency")-before.Int("zk_cnt_updatelatency"), "writes")
	require.EqualValues(t, n, after.Int("zk_cnt_readlatency")-before.Int("zk_cnt_readlatency"), "reads")
	require.EqualValues(t, n, zktest.WatchEventsFired(before, after), "watch events")
	require.Zero(t, mntr(t).WatchCount()-before.WatchCount(), "no watch left")
}

// Handing the lock down a queue of five: each hand-off costs the delete, and
// one listing for a waiter whose predecessor was a waiter when it queued (none
// for the first, whose predecessor was the holder). No new holder reads
// anything more: each read its own node (token and own-node watch) while it
// queued, in the flight of its first watch, and the first proves its node
// survived the holder's leaving from the order of events alone. Each release
// fires the releaser's own-node watch and the successor's watch, nothing else.
func TestRequestCostHandOffs(t *testing.T) {
	p := lockPath(t)
	obs := observer(t)
	m, err := connect(t, zklock.WithCleanupDelay(0), quietSession).NewMutex(p)
	require.NoError(t, err)
	holder, err := m.Acquire(context.Background())
	require.NoError(t, err)
	tokenOf(holder)
	base := mntr(t).WatchCount()
	const w = 5
	ws := queueWaiters(t, obs, p, 1, w)
	obs.Close()
	// Each waiter watches the node ahead and its own.
	eventually(t, "every waiter's two watches", func() bool { return mntr(t).WatchCount() >= base+2*w })

	before := mntr(t)
	require.NoError(t, holder.Release(context.Background()))
	for i, wp := range ws {
		l := <-wp.got
		tokenOf(l)
		close(wp.release)
		require.NoError(t, <-wp.errc)
		_ = i
	}
	after := mntr(t)
	require.EqualValues(t, w+1, after.Int("zk_cnt_updatelatency")-before.Int("zk_cnt_updatelatency"), "writes")
	require.EqualValues(t, w-1, after.Int("zk_cnt_readlatency")-before.Int("zk_cnt_readlatency"), "reads")
	require.EqualValues(t, 2*w+1, zktest.WatchEventsFired(before, after), "watch events")
}

// watchersOf counts the sessions watching node, from the server's wchp.
func watchersOf(t testing.TB, node string) int {
	t.Helper()
	out, err := zktest.FourLetter(ctxTimeout(t, 5*time.Second), cluster.Addrs()[0], "wchp")
	require.NoError(t, err)
	n, in := 0, false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case line == node:
			in = true
		case strings.HasPrefix(line, "/"):
			in = false
		case in && strings.TrimSpace(line) != "":
			n++
		}
	}
	return n
}

type acquired struct {
	l   *zklock.Lease
	err error
}

func acquireAsync(t *testing.T, m *zklock.Mutex) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := m.Acquire(ctxTimeout(t, 30*time.Second))
		ch <- acquired{l, err}
	}()
	return ch
}

// H holds, W waits behind H, X behind W. Someone deletes W's node: X now
// also watches H. When H leaves, only X may get the lock; W queues again.
func TestWaiterWhoseNodeWasDeletedIsNeverGranted(t *testing.T) {
	t.Parallel()
	for _, watch := range []bool{true, false} {
		t.Run(fmt.Sprintf("ownNodeWatch=%v", watch), func(t *testing.T) {
			p, obs, _, h := holding(t)
			tokenOf(h)
			mw, err := connect(t, zklock.WithOwnNodeWatch(watch)).NewMutex(p)
			require.NoError(t, err)
			mx, err := connect(t, zklock.WithOwnNodeWatch(watch)).NewMutex(p)
			require.NoError(t, err)
			w := acquireAsync(t, mw)
			waitChildren(t, obs, p, 2)
			x := acquireAsync(t, mx)
			waitChildren(t, obs, p, 3)
			queue := lockChildren(t, obs, p)
			// The holder's own-node watch and W's: W's is set after its node
			// appears, and counting before it lands would expect one too few.
			eventually(t, "W watches the holder", func() bool { return watchersOf(t, h.Node()) == 2 })
			before := 2
			require.NoError(t, obs.Delete(p+"/"+queue[1], -1))
			eventually(t, "X watches the holder", func() bool { return watchersOf(t, h.Node()) == before+1 })

			require.NoError(t, h.Release(context.Background()))
			got := <-x
			require.NoError(t, got.err)
			waitChildren(t, obs, p, 2) // X holds, W queued again behind it
			select {
			case r := <-w:
				t.Fatalf("W was granted on a deleted node while X holds: %v", r)
			default:
			}
			require.NoError(t, got.l.Release(context.Background()))
			r := <-w
			require.NoError(t, r.err)
			require.NoError(t, r.l.Release(context.Background()))
		})
	}
}

// With re-queueing off, a waiter whose node someone deleted says so (not
// that its session expired).
func TestRequeueOffReportsDeletedNode(t *testing.T) {
	t.Parallel()
	p, obs, _, h := holding(t)
	m, err := connect(t, zklock.WithRequeueOnExpiry(false)).NewMutex(p)
	require.NoError(t, err)
	w := acquireAsync(t, m)
	waitChildren(t, obs, p, 2)
	queue := lockChildren(t, obs, p)
	require.NoError(t, obs.Delete(p+"/"+queue[1], -1))
	require.NoError(t, h.Release(context.Background()))
	r := <-w
	require.ErrorIs(t, r.err, zklock.ErrQueueNodeDeleted)
	require.NotErrorIs(t, r.err, zklock.ErrSessionExpired)
}

// A create whose reply is lost (the connection is cut after the server made
// the node) is recovered by its GUID: no second node, and the lock works.
func TestLostCreateReplyAdoptsTheNode(t *testing.T) {
	t.Parallel()
	p, obs, _, h := holding(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	m, err := connectVia(t, []string{proxy.Addr()}).NewMutex(p)
	require.NoError(t, err)
	proxy.StallReplies()
	w := acquireAsync(t, m)
	waitChildren(t, obs, p, 2) // the create reached the server; its reply is held
	proxy.Cut()
	proxy.Resume()

	require.NoError(t, h.Release(context.Background()))
	r := <-w
	require.NoError(t, r.err)
	require.Equal(t, []string{path.Base(r.l.Node())}, lockChildren(t, obs, p), "exactly the adopted node")
	require.NoError(t, r.l.Release(context.Background()))
	require.Empty(t, lockChildren(t, obs, p))
}

// A connection reset right before Release (go-zookeeper then returns the raw
// network error) must not leave the node blocking the queue, nor fail.
func TestResetBeforeReleaseDoesNotBlockTheQueue(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	m, err := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(testSession)).NewMutex(p)
	require.NoError(t, err)
	other, err := connect(t).NewMutex(p)
	require.NoError(t, err)
	for round := 0; round < 3; round++ {
		l, err := m.Acquire(ctxTimeout(t, 10*time.Second))
		require.NoError(t, err)
		proxy.Cut()
		require.NoError(t, l.Release(ctxTimeout(t, 10*time.Second)), "round %d", round)
		ol, err := other.Acquire(ctxTimeout(t, 2*time.Second))
		require.NoError(t, err, "round %d: the queue is blocked", round)
		require.NoError(t, ol.Release(context.Background()))

		proxy.Cut() // and right before an Acquire's create
		l, err = m.Acquire(ctxTimeout(t, 10*time.Second))
		require.NoError(t, err, "round %d", round)
		require.NoError(t, l.Release(ctxTimeout(t, 10*time.Second)))
	}
	require.Empty(t, lockChildren(t, obs, p))
}

// TestLockerViews checks that an RWMutex's Writer and Reader act as its
// write and read sides.
func TestLockerViews(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	rw, err := connect(t).NewRWMutex(p)
	require.NoError(t, err)
	ctx := context.Background()
	var w, r zklock.Locker = rw.Writer(), rw.Reader()

	r1, err := r.Acquire(ctx)
	require.NoError(t, err)
	r2, err := r.TryAcquire(ctx)
	require.NoError(t, err, "readers share")
	_, err = w.TryAcquire(ctx)
	require.ErrorIs(t, err, zklock.ErrLocked)
	require.NoError(t, r1.Release(ctx))
	require.NoError(t, r2.Release(ctx))

	wl, err := w.Acquire(ctx)
	require.NoError(t, err)
	_, err = r.TryAcquire(ctx)
	require.ErrorIs(t, err, zklock.ErrLocked)
	require.NoError(t, wl.Release(ctx))
}
