package zklock_test

import (
	"context"
	"slices"
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

func semOn(t *testing.T, p string, n int, opts ...zklock.Option) *zklock.Semaphore {
	t.Helper()
	s, err := connect(t, opts...).NewSemaphore(p, n)
	require.NoError(t, err)
	return s
}

// Eight workers on their own sessions cycle through a semaphore of 3: never
// more than 3 inside at once (on this process's monotonic clock), and all 3
// slots get used.
func TestSemaphoreNeverMoreThanN(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	const n, workers, cycles = 3, 8, 6
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		s := semOn(t, p, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range cycles {
				l, err := s.Acquire(ctxTimeout(t, 30*time.Second))
				if !assert.NoError(t, err) {
					return
				}
				now := inside.Add(1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				// Until every slot has been used once, a holder stays for
				// the others to fill them (20 ms did not, on a loaded
				// machine); then it holds briefly.
				for deadline := time.Now().Add(10 * time.Second); most.Load() < n && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				time.Sleep(20 * time.Millisecond)
				inside.Add(-1)
				assert.NoError(t, l.Release(context.Background()))
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int32(n))
	assert.Equal(t, int32(n), most.Load(), "every slot was used")
}

// Waiters are served in arrival order: with the N slots taken, waiters
// queued one after another get slots in that order.
func TestSemaphoreIsFair(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	held := []*zklock.Lease{}
	for range 2 {
		l, err := semOn(t, p, 2).Acquire(ctxTimeout(t, 10*time.Second))
		require.NoError(t, err)
		held = append(held, l)
	}
	_, err := semOn(t, p, 2).TryAcquire(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrLocked)
	hs, err := semOn(t, p, 2).Holders(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.Len(t, hs, 2)
	assert.True(t, hs[0].Holder && hs[1].Holder, "both leases hold")

	// Two permits: waiters 0 and 1 may be granted at the same moment, so
	// fairness is read off the leases' places, not the order of the grants.
	var mu sync.Mutex
	seqs := make([]int64, 4)
	var wg sync.WaitGroup
	for i := range 4 {
		s := semOn(t, p, 2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := s.Acquire(ctxTimeout(t, 30*time.Second))
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			seqs[i] = l.Sequence()
			mu.Unlock()
			assert.NoError(t, l.Release(context.Background()))
		}()
		waitChildren(t, obs, p+"/locks", i+1) // queued before the next one starts
	}
	for _, l := range held {
		require.NoError(t, l.Release(context.Background()))
	}
	wg.Wait()
	assert.True(t, slices.IsSorted(seqs), "leases in the order the waiters queued: %v", seqs)
	assert.Equal(t, len(slices.Compact(slices.Clone(seqs))), 4, "%v", seqs)
}

func TestSemaphoreLimitMismatch(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	l, err := semOn(t, p, 2).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	_, err = semOn(t, p, 3).Acquire(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrLimitMismatch)
	assert.Contains(t, err.Error(), `stores "2"`)
	require.NoError(t, l.Release(context.Background()))
	data, _, err := observer(t).Get(p)
	require.NoError(t, err)
	assert.Equal(t, "2", string(data), "the limit stays with the path")
	_, err = connect(t).NewSemaphore(p, 0)
	require.ErrorIs(t, err, zklock.ErrInvalidArgument, "an argument, not an option")
	require.NotErrorIs(t, err, zklock.ErrInvalidOption)
}

// A holder cut off from ZooKeeper loses its lease, its session expires and
// its slot goes to the waiter, which is granted only after the holder's Done
// closed.
func TestSemaphoreLostHolderFreesSlot(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	p := lockPath(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	s, err := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(timeout)).NewSemaphore(p, 1)
	require.NoError(t, err)
	l, err := s.Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	waiting := make(chan time.Time, 1)
	go func() {
		wl, err := semOn(t, p, 1).Acquire(ctxTimeout(t, 30*time.Second))
		if assert.NoError(t, err) {
			waiting <- time.Now()
			assert.NoError(t, wl.Release(context.Background()))
		}
		close(waiting)
	}()
	waitChildren(t, observer(t), p+"/locks", 1)
	proxy.Stall() // the holder's process is cut off: its session expires
	var lost time.Time
	select {
	case <-l.Done():
		lost = time.Now()
	case <-time.After(10 * time.Second):
		t.Fatal("loss not noticed")
	}
	require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
	granted, ok := <-waiting
	require.True(t, ok, "the waiter got the slot")
	assert.True(t, granted.After(lost), "the waiter was granted (%v) after the holder knew it had lost (%v)", granted, lost)
	proxy.Resume()
}

// Giving up while waiting for a slot leaves neither a lease node nor a
// turnstile node behind.
func TestSemaphoreGiveUpLeavesNothing(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	l, err := semOn(t, p, 1).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	_, err = semOn(t, p, 1).Acquire(ctxTimeout(t, 300*time.Millisecond))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Len(t, lockChildren(t, obs, p+"/leases"), 1)
	assert.Empty(t, lockChildren(t, obs, p+"/locks"))
	require.NoError(t, l.Release(context.Background()))
}

// A waiter whose session expires while it holds the turnstile queues on the
// turnstile again, behind whoever queued there meanwhile (here a bare peer,
// as Curator would be), never straight into the leases: a lease created
// without the turnstile would jump that queue, and beside a Curator peer,
// which counts leases, nobody would take the free slot.
func TestSemaphoreWaiterRequeuesThroughTheTurnstile(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	held, err := semOn(t, p, 1).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	z, err := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(time.Second)).NewSemaphore(p, 1)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		l, err := z.Acquire(ctxTimeout(t, 30*time.Second))
		if err == nil {
			err = l.Release(context.Background())
		}
		done <- err
	}()
	waitChildren(t, obs, p+"/leases", 2) // Z holds the turnstile and waits for the slot
	peer := observer(t)
	peerTurn, err := peer.CreateProtectedEphemeralSequential(p+"/locks/lock-", nil, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	proxy.Stall() // Z's session expires: its turnstile and lease go
	eventually(t, "Z's nodes gone", func() bool {
		return len(lockChildren(t, obs, p+"/locks")) == 1 && len(lockChildren(t, obs, p+"/leases")) == 1
	})
	proxy.Resume()
	waitChildren(t, obs, p+"/locks", 2) // Z is back, behind the peer's turnstile node
	assert.Len(t, lockChildren(t, obs, p+"/leases"), 1, "no lease without the turnstile")

	require.NoError(t, peer.Delete(peerTurn, -1))
	require.NoError(t, held.Release(context.Background()))
	require.NoError(t, <-done)
}
