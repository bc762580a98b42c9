package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

func TestDoCancelsFnOnLoss(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	p := lockPath(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(timeout))
	m, err := c.NewMutex(p)
	require.NoError(t, err)
	running := make(chan struct{})
	var cause error
	err = m.Do(context.Background(), func(ctx context.Context) error {
		close(running)
		proxy.Stall()
		<-ctx.Done()
		cause = context.Cause(ctx)
		return ctx.Err()
	})
	proxy.Resume()
	proxy.Cut() // the stalled connections are stale: reconnect at once
	require.ErrorIs(t, err, zklock.ErrLockLost)
	require.ErrorIs(t, cause, zklock.ErrLockLost)

	// After the partition heals, Do works again on a new session.
	err = m.Do(ctxTimeout(t, 30*time.Second), func(ctx context.Context) error { return errors.New("boom") })
	require.EqualError(t, err, "boom")
}

func TestRunSingletonHandsOverOnPartition(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	p := lockPath(t)
	obs := observer(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	a := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(timeout))
	b := connect(t)

	var running atomic.Int32
	var overlaps atomic.Int32
	type event struct {
		who  string
		what string
		at   time.Time
	}
	events := make(chan event, 64)
	fn := func(who string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			if running.Add(1) != 1 {
				overlaps.Add(1)
			}
			events <- event{who, "start", time.Now()}
			<-ctx.Done()
			running.Add(-1)
			events <- event{who, "stop", time.Now()}
			return ctx.Err()
		}
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	doneA := make(chan error, 1)
	doneB := make(chan error, 1)
	lostA := make(chan error, 4)
	go func() {
		doneA <- mustMutex(t, a, p).RunSingleton(ctxA, fn("a"), zklock.OnLost(func(err error) { lostA <- err }))
	}()
	require.Equal(t, event{"a", "start", time.Time{}}.what, (<-events).what)
	mb := mustMutex(t, b, p)
	go func() { doneB <- mb.RunSingleton(ctxB, fn("b")) }()
	waitChildren(t, obs, p, 2)

	proxy.Stall()
	stopA := <-events
	require.Equal(t, "a", stopA.who)
	require.Equal(t, "stop", stopA.what)
	startB := <-events
	require.Equal(t, "b", startB.who)
	require.Equal(t, "start", startB.what)
	require.True(t, stopA.at.Before(startB.at), "a still ran when b started")
	require.ErrorIs(t, <-lostA, zklock.ErrLockLost)

	// Healed, a campaigns again and waits behind b.
	proxy.Resume()
	proxy.Cut()
	waitChildren(t, obs, p, 2)
	cancelB()
	require.ErrorIs(t, <-doneB, context.Canceled)
	ev := <-events
	require.Equal(t, "b", ev.who)
	ev = <-events
	require.Equal(t, fmt.Sprint("a", "start"), ev.who+ev.what)
	cancelA()
	require.ErrorIs(t, <-doneA, context.Canceled)
	require.Zero(t, overlaps.Load(), "two singletons ran at once")
}

// Do and RunSingleton hand fn its lease: the one that holds the node, with
// its token; outside them LeaseOf is nil.
func TestDoAndRunSingletonHandFnTheLease(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	m := mustMutex(t, connect(t), p)
	require.Nil(t, zklock.LeaseOf(context.Background()))
	check := func(ctx context.Context) {
		l := zklock.LeaseOf(ctx)
		require.NotNil(t, l)
		require.NoError(t, l.Err())
		tok, err := l.Token(ctx)
		require.NoError(t, err)
		_, stat, err := obs.Get(l.Node())
		require.NoError(t, err)
		require.Equal(t, stat.Czxid, tok)
	}
	require.NoError(t, m.Do(ctxTimeout(t, 10*time.Second), func(ctx context.Context) error { check(ctx); return nil }))
	require.NoError(t, m.RunSingleton(ctxTimeout(t, 10*time.Second), func(ctx context.Context) error { check(ctx); return nil }))
}
