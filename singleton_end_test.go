package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// recovered runs f and returns what it panicked with (nil if it did not),
// as net/http's recover of a handler's panic would.
func recovered(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// A panic in fn that something above recovers releases the lease on the way
// out: another client gets the lock at once, and the panic goes on with its
// value. Before issue 58 the lease stayed held until the client closed, and
// the other client's TryAcquire got ErrLocked.
func TestDoAndRunSingletonReleaseOnPanic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		run  func(m *zklock.Mutex, fn func(context.Context) error) error
	}{
		{"Do", func(m *zklock.Mutex, fn func(context.Context) error) error {
			return m.Do(ctxTimeout(t, 10*time.Second), fn)
		}},
		{"RunSingleton", func(m *zklock.Mutex, fn func(context.Context) error) error {
			lost := 0
			defer func() { require.Zero(t, lost, "OnLost ran for a panic") }()
			return m.RunSingleton(ctxTimeout(t, 10*time.Second), fn, zklock.OnLost(func(error) { lost++ }))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := lockPath(t)
			m := mustMutex(t, connect(t), p)
			other := mustMutex(t, connect(t), p)
			v := recovered(func() {
				tc.run(m, func(ctx context.Context) error {
					panic("fn failed")
				})
			})
			require.Equal(t, "fn failed", v, "the panic did not go on")
			l, err := other.TryAcquire(ctxTimeout(t, 10*time.Second))
			require.NoError(t, err, "the lease of the panicked fn is still held")
			require.NoError(t, l.Release(context.Background()))
			waitChildren(t, observer(t), p, 0)
		})
	}
}

// Client.Close cutting fn short is not fn's success: Do and RunSingleton
// return an error matching ErrClosed (wrapping fn's), and RunSingleton calls
// OnLost with it first. Before issue 58 Do returned fn's own error (nil for
// a fn that returns nil once cancelled), and OnLost never ran.
func TestDoAndRunSingletonCutShortByClose(t *testing.T) {
	t.Parallel()
	for _, fnErr := range []error{nil, context.Canceled} {
		name := "fn returns nil"
		if fnErr != nil {
			name = "fn returns ctx.Err()"
		}
		t.Run("Do/"+name, func(t *testing.T) {
			c := connect(t)
			m := mustMutex(t, c, lockPath(t))
			var cause error
			err := m.Do(ctxTimeout(t, 10*time.Second), func(ctx context.Context) error {
				go c.Close()
				<-ctx.Done()
				cause = context.Cause(ctx)
				if fnErr != nil {
					return ctx.Err()
				}
				return nil
			})
			require.ErrorIs(t, err, zklock.ErrClosed)
			require.ErrorIs(t, cause, zklock.ErrClosed)
			if fnErr != nil {
				require.ErrorIs(t, err, fnErr, "fn's error is not wrapped")
			}
		})
		t.Run("RunSingleton/"+name, func(t *testing.T) {
			c := connect(t)
			m := mustMutex(t, c, lockPath(t))
			var elected int
			var lost []error
			err := m.RunSingleton(ctxTimeout(t, 10*time.Second), func(ctx context.Context) error {
				go c.Close()
				<-ctx.Done()
				if fnErr != nil {
					return ctx.Err()
				}
				return nil
			}, zklock.OnElected(func(*zklock.Lease) { elected++ }), zklock.OnLost(func(err error) { lost = append(lost, err) }))
			require.ErrorIs(t, err, zklock.ErrClosed)
			require.Equal(t, 1, elected)
			require.Len(t, lost, 1, "OnLost did not run once for the leadership Close ended")
			require.ErrorIs(t, lost[0], zklock.ErrClosed)
		})
	}
}

// fn that returns while it holds is fn's outcome, even if Close comes right
// after: Do returns fn's error, and OnLost does not run.
func TestDoAndRunSingletonReturnFnsErrorWhenHeld(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	c := connect(t)
	m := mustMutex(t, c, lockPath(t))
	require.ErrorIs(t, m.Do(ctxTimeout(t, 10*time.Second), func(context.Context) error { return boom }), boom)
	lost := 0
	err := m.RunSingleton(ctxTimeout(t, 10*time.Second), func(context.Context) error { return nil },
		zklock.OnLost(func(error) { lost++ }))
	require.NoError(t, err)
	require.Zero(t, lost)
}
