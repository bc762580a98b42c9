package zklock_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// requests counts the reads and writes the server has served.
func requests(t testing.TB) int64 {
	m := mntr(t)
	return m.Int("zk_cnt_readlatency") + m.Int("zk_cnt_updatelatency")
}

func TestReentrantSameGoroutine(t *testing.T) {
	p := lockPath(t)
	obs := observer(t)
	r, err := connect(t).NewReentrantMutex(p)
	require.NoError(t, err)
	ctx := context.Background()

	first, err := r.Acquire(ctx)
	require.NoError(t, err)
	tokenOf(first)
	_, before, err := obs.Get(first.Node())
	require.NoError(t, err)

	reqs := requests(t)
	for i := 0; i < 2; i++ {
		l, err := r.Acquire(ctx)
		require.NoError(t, err)
		require.Same(t, first, l)
	}
	require.Equal(t, reqs, requests(t), "nested acquires must not talk to ZooKeeper")
	_, after, err := obs.Get(first.Node())
	require.NoError(t, err)
	require.Equal(t, before.Mzxid, after.Mzxid, "a nested acquire does not rewrite the owner record")

	for i := 0; i < 2; i++ {
		require.NoError(t, r.Release(ctx))
		require.Len(t, lockChildren(t, obs, p), 1, "the node stays until the last release")
	}
	require.NoError(t, r.Release(ctx))
	require.Empty(t, lockChildren(t, obs, p))
	require.ErrorIs(t, first.Err(), zklock.ErrReleased)

	// Releasing more than acquired is an error and changes nothing.
	require.ErrorIs(t, r.Release(ctx), zklock.ErrNotHeld)
	l, err := r.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Release(ctx))
	require.ErrorIs(t, l.Err(), zklock.ErrReleased)
}

func TestReentrantOtherGoroutineWaits(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	r, err := connect(t).NewReentrantMutex(p)
	require.NoError(t, err)
	_, err = r.Acquire(context.Background())
	require.NoError(t, err)

	type outcome struct{ acquire, release error }
	done := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, aerr := r.Acquire(ctx)
		done <- outcome{aerr, r.Release(context.Background())}
	}()
	o := <-done
	require.ErrorIs(t, o.acquire, context.DeadlineExceeded, "another goroutine must queue, not re-enter")
	require.ErrorIs(t, o.release, zklock.ErrNotOwner)
	require.Len(t, lockChildren(t, obs, p), 1, "the failed Release changed nothing")
	require.NoError(t, r.Release(context.Background()))
}

func TestReentrantTwoClientsSameGoroutine(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	a, err := connect(t).NewReentrantMutex(p)
	require.NoError(t, err)
	b, err := connect(t).NewReentrantMutex(p)
	require.NoError(t, err)
	_, err = a.Acquire(context.Background())
	require.NoError(t, err)

	// Same goroutine, different client: a different owner.
	_, err = b.Acquire(ctxTimeout(t, 300*time.Millisecond))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, b.Release(context.Background()), zklock.ErrNotHeld)
	require.NoError(t, a.Release(context.Background()))
}

func TestReentrantExplicitOwner(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	c := connect(t)
	r, err := c.NewReentrantMutex(p)
	require.NoError(t, err)
	job := zklock.ContextWithOwner(context.Background(), "job-42")

	l, err := r.Acquire(job)
	require.NoError(t, err)
	data, _, err := obs.Get(l.Node())
	require.NoError(t, err)
	var rec zklock.Owner
	require.NoError(t, json.Unmarshal(data, &rec))
	require.Equal(t, "job-42", rec.Name)
	require.Equal(t, c.ID(), rec.Client)

	errc := make(chan error, 3)
	go func() {
		_, err := r.Acquire(job) // same owner, other goroutine: re-enters
		errc <- err
		errc <- r.Release(zklock.ContextWithOwner(context.Background(), "someone-else"))
		errc <- r.Release(job)
	}()
	require.NoError(t, <-errc)
	require.ErrorIs(t, <-errc, zklock.ErrNotOwner)
	require.NoError(t, <-errc)
	require.Len(t, lockChildren(t, obs, p), 1)
	require.NoError(t, r.Release(job))
	require.Empty(t, lockChildren(t, obs, p))
}

// Goroutines sharing an explicit owner re-enter each other's hold, and one
// that arrives while the last hold is being released must not re-enter a
// lease whose node is being deleted: another client could take the lock.
func TestReentrantSharedOwnerHammer(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	a, err := connect(t).NewReentrantMutex(p)
	require.NoError(t, err)
	b, err := connect(t).NewMutex(p)
	require.NoError(t, err)
	job := zklock.ContextWithOwner(context.Background(), "shared-job")

	var mu sync.Mutex
	aInside, bInside, overlaps := 0, 0, 0
	enter := func(mine, theirs *int) {
		mu.Lock()
		defer mu.Unlock()
		if *theirs > 0 {
			overlaps++
		}
		*mine++
	}
	leave := func(mine *int) {
		mu.Lock()
		defer mu.Unlock()
		*mine--
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 25; j++ {
				if _, err := a.Acquire(job); !assert.NoError(t, err) {
					return
				}
				enter(&aInside, &bInside)
				leave(&aInside)
				assert.NoError(t, a.Release(job))
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for j := 0; j < 25; j++ {
			l, err := b.Acquire(context.Background())
			if !assert.NoError(t, err) {
				return
			}
			enter(&bInside, &aInside)
			leave(&bInside)
			assert.NoError(t, l.Release(context.Background()))
		}
	}()
	wg.Wait()
	require.Zero(t, overlaps)
	require.Empty(t, lockChildren(t, observer(t), p))
}

// An owner whose first Acquire is still queued does not hold the lock: its
// Release says ErrNotHeld, not ErrNotOwner.
func TestReentrantReleaseWhileOwnAcquireQueued(t *testing.T) {
	t.Parallel()
	p, obs, _, h := holding(t)
	r, err := connect(t).NewReentrantMutex(p)
	require.NoError(t, err)
	job := zklock.ContextWithOwner(context.Background(), "job-7")
	got := make(chan error, 1)
	go func() {
		_, err := r.Acquire(job)
		got <- err
	}()
	waitChildren(t, obs, p, 2)
	err = r.Release(job)
	require.ErrorIs(t, err, zklock.ErrNotHeld)
	require.NotErrorIs(t, err, zklock.ErrNotOwner)

	require.NoError(t, h.Release(context.Background()))
	require.NoError(t, <-got)
	require.NoError(t, r.Release(job))
}

// One release rule: the lease and the mutex count down the same holds. A
// Lease.Release on a hold count of 2 leaves the node; the mutex's Release
// then deletes it; a third Release, of either, is ErrNotHeld.
func TestReentrantLeaseAndMutexAgree(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	rm, err := connect(t).NewReentrantMutex(p)
	require.NoError(t, err)
	ctx := context.Background()
	outer, err := rm.Acquire(ctx)
	require.NoError(t, err)
	inner, err := rm.Acquire(ctx)
	require.NoError(t, err)
	require.Same(t, outer, inner)

	require.NoError(t, inner.Release(ctx), "a nested release")
	require.NoError(t, outer.Err(), "still held")
	assert.Len(t, lockChildren(t, obs, p), 1)
	require.NoError(t, rm.Release(ctx), "the last release deletes the node")
	assert.ErrorIs(t, outer.Err(), zklock.ErrReleased)
	assert.Empty(t, lockChildren(t, obs, p))
	assert.ErrorIs(t, rm.Release(ctx), zklock.ErrNotHeld)
	assert.ErrorIs(t, outer.Release(ctx), zklock.ErrNotHeld)

	// The lease releases from any goroutine, for its owner.
	l, err := rm.Acquire(ctx)
	require.NoError(t, err)
	done := make(chan error)
	go func() { done <- l.Release(ctx) }()
	require.NoError(t, <-done)
	assert.Empty(t, lockChildren(t, obs, p))
	again, err := rm.Acquire(ctx)
	require.NoError(t, err, "the hold was forgotten: a new Acquire queues afresh")
	require.NotSame(t, l, again)
	require.NoError(t, again.Release(ctx))
}

func TestReentrantTryAcquire(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	c := connect(t)
	r, err := c.NewReentrantMutex(p)
	require.NoError(t, err)
	ctx := context.Background()
	alice := zklock.ContextWithOwner(ctx, "alice")
	bob := zklock.ContextWithOwner(ctx, "bob")

	first, err := r.TryAcquire(alice)
	require.NoError(t, err)
	again, err := r.TryAcquire(alice)
	require.NoError(t, err, "the owner re-enters at once")
	require.Same(t, first, again)

	_, err = r.TryAcquire(bob)
	require.ErrorIs(t, err, zklock.ErrLocked)
	require.Len(t, lockChildren(t, obs, p), 1, "a refused try leaves nothing behind")

	require.NoError(t, r.Release(alice))
	require.NoError(t, r.Release(alice))
	l, err := r.TryAcquire(bob)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
}
