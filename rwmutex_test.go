package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// rwOn returns an RWMutex on p for a client of its own (its own session, as
// another process would have).
func rwOn(t *testing.T, p string, opts ...zklock.Option) *zklock.RWMutex {
	t.Helper()
	rw, err := connect(t, opts...).NewRWMutex(p)
	require.NoError(t, err)
	return rw
}

// rwAsync acquires in the background, as a reader or a writer.
func rwAsync(t *testing.T, rw *zklock.RWMutex, write bool) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		ctx := ctxTimeout(t, 30*time.Second)
		var l *zklock.Lease
		var err error
		if write {
			l, err = rw.AcquireWrite(ctx)
		} else {
			l, err = rw.AcquireRead(ctx)
		}
		ch <- acquired{l, err}
	}()
	return ch
}

func got(t *testing.T, ch <-chan acquired) *zklock.Lease {
	t.Helper()
	select {
	case a := <-ch:
		require.NoError(t, a.err)
		return a.l
	case <-time.After(20 * time.Second):
		t.Fatal("not granted")
		return nil
	}
}

func notYet(t *testing.T, ch <-chan acquired) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("granted too early (err %v)", a.err)
	default:
	}
}

func TestRWMutexReadersShare(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	var leases []*zklock.Lease
	for range 4 {
		l, err := rwOn(t, p).AcquireRead(ctxTimeout(t, 10*time.Second))
		require.NoError(t, err)
		leases = append(leases, l)
	}
	l, err := rwOn(t, p).TryAcquireRead(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err, "a fifth reader joins at once")
	leases = append(leases, l)
	_, err = rwOn(t, p).TryAcquireWrite(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrLocked)
	for _, l := range leases {
		require.NoError(t, l.Err())
		require.NoError(t, l.Release(context.Background()))
	}
}

// A writer waits for the readers ahead; readers that arrive after the writer
// queue behind it (no starvation), and the writer's release frees them all.
func TestRWMutexWriterIsServedBeforeLaterReaders(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	r1, err := rwOn(t, p).AcquireRead(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	w := rwAsync(t, rwOn(t, p), true)
	waitChildren(t, obs, p, 2)
	r2 := rwAsync(t, rwOn(t, p), false)
	r3 := rwAsync(t, rwOn(t, p), false)
	waitChildren(t, obs, p, 4)
	eventually(t, "both late readers watch the writer", func() bool {
		// The writer watches its own node too (set while it waits).
		return watchersOf(t, p+"/"+lockChildren(t, obs, p)[1]) == 3
	})
	notYet(t, w)
	notYet(t, r2)
	notYet(t, r3)

	require.NoError(t, r1.Release(context.Background()))
	wl := got(t, w)
	notYet(t, r2)
	notYet(t, r3)
	require.NoError(t, wl.Release(context.Background()))
	l2, l3 := got(t, r2), got(t, r3)
	require.NoError(t, l2.Release(context.Background()))
	require.NoError(t, l3.Release(context.Background()))
}

// W1 holds; R1 R2 R3 wait for it; W2 waits for R3; R4 waits for W2. W1's
// release wakes exactly R1..R3: three watch events, W2 and R4 sleep on.
func TestRWMutexReleaseWakesExactlyWhomItFrees(t *testing.T) {
	p := lockPath(t)
	obs := observer(t)
	nowatch := zklock.WithOwnNodeWatch(false) // so the only watches are the waiters'
	w1, err := rwOn(t, p, nowatch).AcquireWrite(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	var readers []<-chan acquired
	for i := range 3 {
		readers = append(readers, rwAsync(t, rwOn(t, p, nowatch), false))
		waitChildren(t, obs, p, 2+i)
	}
	w2 := rwAsync(t, rwOn(t, p, nowatch), true)
	waitChildren(t, obs, p, 5)
	r4 := rwAsync(t, rwOn(t, p, nowatch), false)
	waitChildren(t, obs, p, 6)
	nodes := lockChildren(t, obs, p)
	eventually(t, "everyone watches", func() bool {
		return watchersOf(t, p+"/"+nodes[0]) == 3 && watchersOf(t, p+"/"+nodes[3]) == 1 && watchersOf(t, p+"/"+nodes[4]) == 1
	})
	obs.Close() // its child watch on p would fire too

	before := mntr(t)
	require.NoError(t, w1.Release(context.Background()))
	var held []*zklock.Lease
	for _, r := range readers {
		held = append(held, got(t, r))
	}
	after := mntr(t)
	assert.EqualValues(t, 3, zktest.WatchEventsFired(before, after), "one event per freed reader, none for W2 or R4")
	notYet(t, w2)
	notYet(t, r4)
	for _, l := range held {
		require.NoError(t, l.Release(context.Background()))
	}
	l := got(t, w2)
	notYet(t, r4)
	require.NoError(t, l.Release(context.Background()))
	require.NoError(t, got(t, r4).Release(context.Background()))
}

// A reader that times out behind a writer, and a writer cancelled behind
// readers, leave nothing behind and block nobody.
func TestRWMutexGiveUpLeavesNothing(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	w, err := rwOn(t, p).AcquireWrite(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	_, err = rwOn(t, p).AcquireRead(ctxTimeout(t, 300*time.Millisecond))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Len(t, lockChildren(t, obs, p), 1)
	require.NoError(t, w.Release(context.Background()))

	r, err := rwOn(t, p).AcquireRead(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := rwOn(t, p).AcquireWrite(ctx)
		done <- err
	}()
	waitChildren(t, obs, p, 2)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Len(t, lockChildren(t, obs, p), 1)
	r2, err := rwOn(t, p).TryAcquireRead(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err, "the cancelled writer no longer blocks readers")
	require.NoError(t, r.Release(context.Background()))
	require.NoError(t, r2.Release(context.Background()))
}

// A reader's lease is lost like a mutex's when its node is deleted.
func TestRWMutexReaderLeaseLoss(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	r, err := rwOn(t, p).AcquireRead(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	tokenOf(r)
	require.NoError(t, obs.Delete(r.Node(), -1))
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("loss not noticed")
	}
	require.ErrorIs(t, r.Err(), zklock.ErrLockLost)
	require.ErrorIs(t, r.Release(context.Background()), zklock.ErrLockLost)
}

// zklock reads kazoo's and Curator's names: a kazoo-style writer node ahead
// blocks a Curator-style reader, and the reverse, and a Mutex on the path is
// a writer to both.
// Curator's and kazoo's read/write names do not order with each other, nor
// with a mutex's: zklock refuses to mix them on one path, and leaves nothing
// behind; the same names share.
func TestRWMutexNamingStylesAreNotMixed(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	kz, err := connect(t).NewRWMutex(p, zklock.KazooNames())
	require.NoError(t, err)
	w, err := kz.AcquireWrite(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	assert.Contains(t, w.Node(), "__lock__")
	_, err = rwOn(t, p).TryAcquireRead(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrIncompatible)
	require.ErrorContains(t, err, "kazoo's Lock or WriteLock")
	_, err = rwOn(t, p).AcquireWrite(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrIncompatible)
	require.NoError(t, w.Release(context.Background()))

	r, err := rwOn(t, p).AcquireRead(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	assert.Contains(t, r.Node(), "__READ__")
	r2, err := rwOn(t, p).TryAcquireRead(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err, "readers of one naming share")
	_, err = kz.TryAcquireRead(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrIncompatible)
	_, err = mustMutex(t, connect(t), p).TryAcquire(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrIncompatible, "a mutex's node would not be seen as a writer by Curator's readers")
	require.ErrorContains(t, err, "zklock primitive for this path: RWMutex")
	assert.Len(t, lockChildren(t, obs, p), 2, "the refused left no node")
	require.NoError(t, r.Release(context.Background()))
	require.NoError(t, r2.Release(context.Background()))
}

func TestRWMutexRejectsBadPath(t *testing.T) {
	t.Parallel()
	_, err := connect(t).NewRWMutex("relative")
	require.ErrorIs(t, err, zklock.ErrInvalidPath)
}

// Curator 5.5 and later downgrade a write lock by making a plain (not
// sequential) ephemeral reader node numbered as the writer's
// (StandardLockInternalsDriver.createsTheLock with ReadLock's sorting
// sequence), then deleting the writer's node. The reader sorts at the
// writer's place, ahead of every waiter. A zklock writer queued right behind
// must not hold while that reader does. The peer here makes Curator's nodes
// name for name, with a raw connection.
func TestRWMutexWriterWaitsForCuratorsDowngradedReader(t *testing.T) {
	p := lockPath(t)
	obs := observer(t)
	c := connect(t)
	require.NoError(t, zklock.EnsureParents(ctxTimeout(t, 5*time.Second), c, p))
	peer := observer(t)
	acl := zk.WorldACL(zk.PermAll)
	writer, err := peer.Create(p+"/_c_0123456789abcdef0123456789abcdef-__WRIT__", nil, zk.FlagEphemeral|zk.FlagSequence, acl)
	require.NoError(t, err)
	base := mntr(t).WatchCount()
	got := make(chan *zklock.Lease, 1)
	go func() {
		rw, err := c.NewRWMutex(p)
		assert.NoError(t, err)
		l, err := rw.AcquireWrite(ctxTimeout(t, 30*time.Second))
		assert.NoError(t, err)
		got <- l
	}()
	waitChildren(t, obs, p, 2)
	eventually(t, "the writer's two watches", func() bool { return mntr(t).WatchCount() >= base+2 })

	// The downgrade, as Curator makes it.
	reader, err := peer.Create(p+"/_c_fedcba9876543210fedcba9876543210-__READ__"+writer[len(writer)-10:], nil, zk.FlagEphemeral, acl)
	require.NoError(t, err)
	require.NoError(t, peer.Delete(writer, -1))
	eventually(t, "the writer watches the reader, or holds", func() bool {
		return len(got) > 0 || mntr(t).WatchCount() >= base+2
	})
	select {
	case l := <-got:
		t.Fatalf("a zklock writer (%s) holds beside Curator's downgraded reader (%s)", l.Node(), reader)
	default:
	}
	require.NoError(t, peer.Delete(reader, -1))
	select {
	case l := <-got:
		require.NotNil(t, l)
		require.NoError(t, l.Release(context.Background()))
	case <-time.After(20 * time.Second):
		t.Fatal("the writer never held after the reader left")
	}
}
