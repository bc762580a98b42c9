package zklock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

func multiOn(t *testing.T, c *zklock.Client, paths ...string) *zklock.MultiLock {
	t.Helper()
	ml, err := c.NewMultiLock(paths...)
	require.NoError(t, err)
	return ml
}

// Two clients take overlapping sets named in opposite orders, many times,
// concurrently: no deadlock (every Acquire returns within its deadline) and
// never two holders of a shared path.
func TestMultiLockOppositeOrdersNeverDeadlock(t *testing.T) {
	t.Parallel()
	base := lockPath(t)
	a, b, c := base+"/a", base+"/b", base+"/c"
	sets := [][]string{{a, b, c}, {c, b, a}, {b, c}, {c, a}}
	var mu sync.Mutex
	holding := map[string]bool{}
	var wg sync.WaitGroup
	for i, set := range sets {
		ml := multiOn(t, connect(t), set...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 8 {
				l, err := ml.Acquire(ctxTimeout(t, 20*time.Second))
				if !assert.NoError(t, err, "set %d", i) {
					return
				}
				mu.Lock()
				for _, p := range set {
					assert.False(t, holding[p], "%s held twice", p)
					holding[p] = true
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				for _, p := range set {
					holding[p] = false
				}
				mu.Unlock()
				assert.NoError(t, l.Release(context.Background()))
			}
		}()
	}
	wg.Wait()
}

// A failure part-way (the second path is held by someone else and the
// deadline passes) leaves nothing held or queued.
func TestMultiLockFailurePartWayLeavesNothing(t *testing.T) {
	t.Parallel()
	base := lockPath(t)
	obs := observer(t)
	a, b := base+"/a", base+"/b"
	other, err := mustMutex(t, connect(t), b).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	ml := multiOn(t, connect(t), b, a)
	assert.Equal(t, []string{a, b}, ml.Paths(), "canonical order")
	_, err = ml.Acquire(ctxTimeout(t, 300*time.Millisecond))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Empty(t, lockChildren(t, obs, a), "a released")
	assert.Len(t, lockChildren(t, obs, b), 1, "only the other holder on b")
	_, err = ml.TryAcquire(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrLocked)
	assert.Empty(t, lockChildren(t, obs, a))
	require.NoError(t, other.Release(context.Background()))

	l, err := ml.TryAcquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.Len(t, l.Parts(), 2)
	tok, err := l.Token(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	assert.Equal(t, max(tokenOf(l.Parts()[0]), tokenOf(l.Parts()[1])), tok)
	require.NoError(t, l.Release(context.Background()))
	require.ErrorIs(t, l.Release(context.Background()), zklock.ErrNotHeld)
	require.ErrorIs(t, l.Err(), zklock.ErrReleased)
}

// The lease ends when any part is lost.
func TestMultiLockLeaseEndsWithAnyPart(t *testing.T) {
	t.Parallel()
	base := lockPath(t)
	obs := observer(t)
	var paths []string
	for i := range 3 {
		paths = append(paths, fmt.Sprintf("%s/p%d", base, i))
	}
	l, err := multiOn(t, connect(t), paths...).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, l.Err())
	tokenOf(l.Parts()[1]) // its own-node watch is set
	require.NoError(t, obs.Delete(l.Parts()[1].Node(), -1))
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("multi-lease not ended")
	}
	require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
	require.ErrorIs(t, l.Release(context.Background()), zklock.ErrLockLost)
	for _, p := range []string{paths[0], paths[2]} {
		assert.Empty(t, lockChildren(t, obs, p), "the other parts are released")
	}
}

func TestMultiLockRejectsBadInput(t *testing.T) {
	t.Parallel()
	c := connect(t)
	_, err := c.NewMultiLock()
	require.ErrorIs(t, err, zklock.ErrInvalidPath)
	_, err = c.NewMultiLock("/ok", "bad/")
	require.ErrorIs(t, err, zklock.ErrInvalidPath)
	ml := multiOn(t, c, "/x/b", "/x/a", "/x/b")
	assert.Equal(t, []string{"/x/a", "/x/b"}, ml.Paths())
}

// A part lost while the MultiLock waits for a later path (here: someone
// deletes its node) makes the MultiLock start over from the first path: the
// lease it returns holds every part.
func TestMultiLockPartLostWhileWaitingStartsOver(t *testing.T) {
	t.Parallel()
	base := lockPath(t)
	obs := observer(t)
	a, b := base+"/a", base+"/b"
	other, err := mustMutex(t, connect(t), b).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	ml := multiOn(t, connect(t), a, b)
	got := make(chan acquired, 1)
	go func() {
		l, err := ml.Acquire(ctxTimeout(t, 30*time.Second))
		got <- acquired{l, err}
	}()
	waitChildren(t, obs, b, 2) // it holds a and waits for b
	first := lockChildren(t, obs, a)
	require.Len(t, first, 1)
	require.NoError(t, obs.Delete(a+"/"+first[0], -1))
	eventually(t, "a taken again", func() bool {
		again := lockChildren(t, obs, a)
		return len(again) == 1 && again[0] != first[0]
	})
	require.NoError(t, other.Release(context.Background()))
	r := <-got
	require.NoError(t, r.err)
	require.NoError(t, r.l.Err(), "every part holds")
	for _, p := range r.l.Parts() {
		require.NoError(t, p.Err())
	}
	require.NotEqual(t, a+"/"+first[0], r.l.Parts()[0].Node())
	require.NoError(t, r.l.Release(context.Background()))
}

// WithRequeueOnExpiry(false): a part lost while the others are taken is
// reported, not taken again.
func TestMultiLockPartLostWithRequeueOffIsReported(t *testing.T) {
	t.Parallel()
	base := lockPath(t)
	obs := observer(t)
	a, b := base+"/a", base+"/b"
	other, err := mustMutex(t, connect(t), b).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	ml := multiOn(t, connect(t, zklock.WithRequeueOnExpiry(false)), a, b)
	got := make(chan error, 1)
	go func() {
		_, err := ml.Acquire(ctxTimeout(t, 30*time.Second))
		got <- err
	}()
	waitChildren(t, obs, b, 2)
	first := lockChildren(t, obs, a)
	require.Len(t, first, 1)
	require.NoError(t, obs.Delete(a+"/"+first[0], -1))
	err = <-got
	require.ErrorIs(t, err, zklock.ErrLockLost)
	require.Contains(t, err.Error(), a)
	assert.Len(t, lockChildren(t, obs, b), 1, "its place on b is given up")
	require.NoError(t, other.Release(context.Background()))
}

// Done closes when the lease's own Release has let every part go, or as soon
// as one part is released on its own.
func TestMultiLockDoneAndPartReleases(t *testing.T) {
	t.Parallel()
	base := lockPath(t)
	c := connect(t)
	ml := multiOn(t, c, base+"/a", base+"/b")
	l, err := ml.Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))
	<-l.Done()
	require.ErrorIs(t, l.Err(), zklock.ErrReleased)

	l, err = ml.Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, l.Parts()[1].Release(context.Background()))
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a part released on its own did not end the whole")
	}
	require.NoError(t, l.Release(context.Background()), "the rest is released; the part already let go is no error")
}
