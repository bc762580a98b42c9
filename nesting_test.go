package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// A lock path inside a lock path in use is refused before it joins the
// outer queue, naming both; the outer lock's holder and waiters go on. On
// 42fd6c9 the inner lock was granted and every later waiter of P failed
// with ErrIncompatible while it was held.
func TestNestedPathRefusedInsideALockPathInUse(t *testing.T) {
	p := lockPath(t)
	obs := observer(t)
	holder := mustMutex(t, connect(t), p)
	h, err := holder.Acquire(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)

	other := connect(t)
	for _, inner := range []string{p + "/x", p + "/x/y"} {
		_, err = mustMutex(t, other, inner).Acquire(ctxTimeout(t, 5*time.Second))
		require.ErrorIs(t, err, zklock.ErrNestedPath, inner)
		require.ErrorContains(t, err, p, "the error names the outer path")
		require.Len(t, lockChildren(t, obs, p), 1, "nothing was left inside %s", p)
	}
	waiter := make(chan error, 1)
	go func() {
		l, err := holder.Acquire(ctxTimeout(t, 10*time.Second))
		if err == nil {
			err = l.Release(context.Background())
		}
		waiter <- err
	}()
	waitChildren(t, obs, p, 2)
	require.NoError(t, h.Release(ctxTimeout(t, 5*time.Second)))
	require.NoError(t, <-waiter, "P's waiter is granted as if nothing happened")
}

// The nested path made first: P's first waiter refuses to queue, naming the
// child, and leaves nothing behind; the inner lock is not disturbed.
func TestNestedPathMadeFirstRefusesTheOuterLock(t *testing.T) {
	p := lockPath(t)
	obs := observer(t)
	inner, err := mustMutex(t, connect(t), p+"/x").Acquire(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	_, err = mustMutex(t, connect(t), p).TryAcquire(ctxTimeout(t, 5*time.Second))
	require.ErrorIs(t, err, zklock.ErrIncompatible)
	require.ErrorContains(t, err, "nested lock path")
	require.ErrorContains(t, err, p+" holds x")
	names, _, err := obs.Children(p)
	require.NoError(t, err)
	require.Equal(t, []string{"x"}, names, "the outer waiter left nothing")
	require.NoError(t, inner.Err())
	require.NoError(t, inner.Release(ctxTimeout(t, 5*time.Second)))
}

// A semaphore's turnstile and leases paths are its queue even while empty:
// a lock inside them is refused too.
func TestNestedPathRefusedInsideASemaphoresLayout(t *testing.T) {
	p := lockPath(t)
	c := connect(t)
	sem, err := c.NewSemaphore(p, 2)
	require.NoError(t, err)
	held, err := sem.Acquire(ctxTimeout(t, 5*time.Second)) // the turnstile is idle again, its path empty
	require.NoError(t, err)
	for _, inner := range []string{p + "/locks/x", p + "/leases/x"} {
		_, err = mustMutex(t, connect(t), inner).Acquire(ctxTimeout(t, 5*time.Second))
		require.ErrorIs(t, err, zklock.ErrNestedPath, inner)
	}
	l, err := sem.Acquire(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err, "the semaphore still serves")
	require.NoError(t, l.Release(ctxTimeout(t, 5*time.Second)))
	require.NoError(t, held.Release(ctxTimeout(t, 5*time.Second)))
}
