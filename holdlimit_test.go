package zklock_test

import (
	"context"
	"encoding/json"
	"path"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// The interleaving a hold limit must survive: a holder whose fn is stuck
// (alive, session healthy) and a waiter queued behind it. The limit must end
// the holder's lease (Done, Err, fn's context) before its node goes, and the
// waiter must be granted only once the holder's node is gone.
func TestHoldLimitEndsAStuckHolderBeforeTheNextHolds(t *testing.T) {
	t.Parallel()
	const limit = 400 * time.Millisecond
	p := lockPath(t)
	obs := observer(t)
	holder := connect(t, zklock.WithMaxHold(limit))
	waiter := connect(t)

	var holderLease *zklock.Lease
	var cause error
	started := make(chan time.Time, 1)
	doErr := make(chan error, 1)
	go func() {
		doErr <- mustMutex(t, holder, p).Do(context.Background(), func(ctx context.Context) error {
			holderLease = zklock.LeaseOf(ctx)
			started <- time.Now()
			<-ctx.Done() // stuck until the limit cancels it
			cause = context.Cause(ctx)
			return ctx.Err()
		})
	}()
	t0 := <-started
	nodes := waitChildren(t, obs, p, 1)
	holderNode := path.Join(p, nodes[0])
	data, _, err := obs.Get(holderNode)
	require.NoError(t, err)
	var rec zklock.Owner
	require.NoError(t, json.Unmarshal(data, &rec))
	require.Equal(t, limit, rec.MaxHold, "the limit is published in the owner record")

	acquired := make(chan *zklock.Lease, 1)
	go func() {
		l, err := mustMutex(t, waiter, p).Acquire(ctxTimeout(t, 30*time.Second))
		if err == nil {
			acquired <- l
		}
		close(acquired)
	}()
	waitChildren(t, obs, p, 2)

	l := <-acquired
	require.NotNil(t, l, "the waiter is granted once the limit ends the holder's lease")
	ok, _, err := obs.Exists(holderNode)
	require.NoError(t, err)
	require.False(t, ok, "the holder's node is gone when the waiter holds")
	require.True(t, isClosed(holderLease.Done()), "the holder's Done closed before the waiter held")
	require.ErrorIs(t, holderLease.Err(), zklock.ErrHoldLimit)
	require.NotErrorIs(t, holderLease.Err(), zklock.ErrLockLost)

	err = <-doErr
	require.ErrorIs(t, err, zklock.ErrHoldLimit, "Do reports the limit")
	require.ErrorIs(t, cause, zklock.ErrHoldLimit, "fn's context says why it was cancelled")
	held := time.Since(t0)
	require.GreaterOrEqual(t, held, limit)
	require.NoError(t, l.Release(ctxTimeout(t, 10*time.Second)))
}

// A lease released before the limit is not touched by it afterwards, and a
// RunSingleton whose fn is stuck campaigns again after the limit.
func TestHoldLimitRunSingletonCampaignsAgain(t *testing.T) {
	t.Parallel()
	const limit = 300 * time.Millisecond
	p := lockPath(t)
	c := connect(t, zklock.WithMaxHold(limit))
	runs := make(chan error, 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- mustMutex(t, c, p).RunSingleton(ctx, func(ctx context.Context) error {
			<-ctx.Done()
			runs <- context.Cause(ctx)
			return ctx.Err()
		})
	}()
	for range 2 {
		select {
		case cause := <-runs:
			require.ErrorIs(t, cause, zklock.ErrHoldLimit)
		case <-time.After(20 * time.Second):
			t.Fatal("the singleton's fn was not ended by the hold limit")
		}
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

func TestWithMaxHoldRefusesNonPositive(t *testing.T) {
	t.Parallel()
	_, err := zklock.Connect(context.Background(), []string{"127.0.0.1:1"}, zklock.WithMaxHold(0))
	require.ErrorIs(t, err, zklock.ErrInvalidOption)
}

// A downgrade is not a new acquisition: the read lease ends at the writer's
// grant plus the limit, not at the downgrade plus the limit, and its record
// publishes only what was left of the limit, for a waiter that breaks it.
func TestHoldLimitRunsFromTheWritersGrantThroughADowngrade(t *testing.T) {
	t.Parallel()
	const (
		limit = 1500 * time.Millisecond
		first = time.Second // held as a writer before the downgrade
	)
	p := lockPath(t)
	obs := observer(t)
	rw, err := connect(t, zklock.WithMaxHold(limit)).NewRWMutex(p)
	require.NoError(t, err)
	w, err := rw.AcquireWrite(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	granted := time.Now() // no earlier than the grant
	time.Sleep(first)     // the writer's part of the hold
	r, err := rw.Downgrade(ctxTimeout(t, 10*time.Second), w)
	require.NoError(t, err)

	data, _, err := obs.Get(r.Node())
	require.NoError(t, err)
	var rec zklock.Owner
	require.NoError(t, json.Unmarshal(data, &rec))
	require.Positive(t, rec.MaxHold)
	require.LessOrEqual(t, rec.MaxHold, limit-first, "the reader publishes what is left of the limit")

	select {
	case <-r.Done():
	case <-time.After(limit + 10*time.Second):
		t.Fatal("the read lease outlived its limit")
	}
	ended := time.Since(granted)
	t.Logf("the downgraded reader ended %v after the writer's grant (limit %v)", ended, limit)
	require.ErrorIs(t, r.Err(), zklock.ErrHoldLimit)
	require.Less(t, ended, limit+first/2, "the limit runs from the writer's grant, not from the downgrade")
}
