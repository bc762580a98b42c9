package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// Errors name the call and the path, and still match their sentinels.
func TestErrorsNameTheCallAndPath(t *testing.T) {
	t.Parallel()
	p, _, m, held := holding(t)
	defer held.Release(context.Background())
	_, err := m.TryAcquire(ctxTimeout(t, 5*time.Second))
	require.ErrorIs(t, err, zklock.ErrLocked)
	assert.EqualError(t, err, "zklock: try-acquire "+p+": lock is held by someone else")
	var op *zklock.OpError
	require.True(t, errors.As(err, &op))
	assert.Equal(t, zklock.OpError{Op: "try-acquire", Path: p, Err: zklock.ErrLocked}, *op)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = m.Acquire(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.EqualError(t, err, "zklock: acquire "+p+": context deadline exceeded")

	rw, err := connect(t).NewRWMutex(p)
	require.NoError(t, err)
	_, err = rw.TryAcquireWrite(ctxTimeout(t, 5*time.Second))
	require.ErrorIs(t, err, zklock.ErrIncompatible)
	assert.Contains(t, err.Error(), "zklock: try-acquire-write "+p+": the lock path is used by another recipe: "+p+" holds ")
}
