package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Do acquires the lock, runs fn while holding it, releases it, and returns
// fn's error. fn's context is cancelled the moment the lease ends (the lock
// is lost, the hold limit passed, the client closes) or ctx ends;
// context.Cause then tells which. LeaseOf(ctx) gives fn the lease: its
// fencing token, and Err to check right before acting.
//
// How Do ends:
//   - fn returned while the lock was held: the lease is released, and Do
//     returns fn's error (nil if fn returned nil), whatever ctx did meanwhile.
//   - The lease ended while fn ran (or between the grant and fn's start, when
//     fn is not run): an error matching ErrLockLost, ErrHoldLimit or, when
//     Client.Close ended it, ErrClosed; it wraps fn's error, if any.
//   - fn panicked (or called runtime.Goexit): the lease is released on the
//     way out, within the cleanup timeout, and the panic goes on.
//   - Acquire failed: its error (ctx's, ErrClosed, ...); fn is not run.
//
// Its time bound is Acquire's, then fn's, then a Release of at most the
// cleanup timeout (the loss at once, if the lease is already lost).
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	l, err := m.Acquire(ctx)
	if err != nil {
		return err
	}
	err, _ = m.c.runHolding(ctx, l, fn)
	return err
}

// leaseKey keys the lease in the context Do and RunSingleton give fn.
type leaseKey struct{}

// LeaseOf returns the Lease under which Do or RunSingleton runs the function
// it was given ctx for, or nil elsewhere: check its Err right before acting,
// and pass its Token to the resource, which must refuse older tokens.
func LeaseOf(ctx context.Context) *Lease {
	l, _ := ctx.Value(leaseKey{}).(*Lease)
	return l
}

// runHolding runs fn under l and releases l afterwards, on a panic in fn
// too (the panic then goes on). It returns fn's error, or the end of the
// lease (ErrLockLost, ErrHoldLimit, ErrClosed) if the lease ended before fn
// returned; ended reports that case.
func (c *Client) runHolding(ctx context.Context, l *Lease, fn func(ctx context.Context) error) (err error, ended bool) {
	fctx, cancel := context.WithCancelCause(context.WithValue(ctx, leaseKey{}, l))
	l.whenEnded(cancel) // at once, before zklock deletes the node (Close)
	release := func() error {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.cleanupTimeout)
		defer rcancel()
		return l.Release(rctx)
	}
	returned := false
	defer func() {
		if !returned { // fn panicked or called runtime.Goexit: let go of the lock on the way out
			cancel(context.Canceled)
			if err := release(); err != nil && !errors.Is(err, ErrNotHeld) {
				c.log.Warn("zklock: release after a panic in fn failed", "path", l.Node(), "err", err)
			}
		}
	}()
	var ferr error
	if l.Err() == nil { // never run fn on a lease that ended since Acquire returned
		ferr = fn(fctx)
	}
	returned = true
	lost := l.Err() // as fn returned: a later end (Close) did not cut fn short
	cancel(context.Canceled)

	rerr := release()
	if lost != nil && endedUnderFn(lost) {
		if ferr != nil {
			return fmt.Errorf("%w (fn: %w)", lost, ferr), true
		}
		return lost, true
	}
	if ferr != nil {
		return ferr, false
	}
	if rerr != nil && !errors.Is(rerr, ErrNotHeld) {
		return rerr, false
	}
	return nil, false
}

// endedUnderFn reports an end of a lease that cut fn short: a loss, the hold
// limit, or Close.
func endedUnderFn(err error) bool {
	return errors.Is(err, ErrLockLost) || errors.Is(err, ErrHoldLimit) || errors.Is(err, ErrClosed)
}

// SingletonOption configures RunSingleton.
type SingletonOption func(*singletonConfig)

type singletonConfig struct {
	onElected func(*Lease)
	onLost    func(error)
	value     string
}

// WithValue publishes v with the singleton's owner record while it runs fn,
// as Election.Campaign's value: Election.Leader and Observe on the same path
// (and zklock leader) say who runs it and where.
func WithValue(v string) SingletonOption {
	return func(s *singletonConfig) { s.value = v }
}

// OnElected is called (on RunSingleton's goroutine) each time this process
// takes the lock, before fn runs.
func OnElected(fn func(*Lease)) SingletonOption {
	return func(s *singletonConfig) { s.onElected = fn }
}

// OnLost is called (on RunSingleton's goroutine) each time the lease ends
// while fn runs, once fn has returned, with the error RunSingleton has for
// that ending: one matching ErrLockLost or ErrHoldLimit (RunSingleton then
// campaigns again, unless ctx has ended), or ErrClosed (Client.Close ended
// it; RunSingleton then returns that error). So every OnElected is followed
// by one OnLost, except when fn returns while the lock is held (RunSingleton
// returns fn's error) or panics.
func OnLost(fn func(error)) SingletonOption {
	return func(s *singletonConfig) { s.onLost = fn }
}

// RunSingleton makes sure at most one process runs fn for the lock's path at a time
// (an election: Election.Leader on the same path says who runs it):
// it campaigns for the lock, runs fn while it holds it, and when the lock is
// lost it cancels fn's context, waits for fn to return, then waits for a
// working session and campaigns again, at the back of the queue.
//
// How RunSingleton ends:
//   - fn returned while the lock was held: the lease is released, and
//     RunSingleton returns fn's error (nil if fn returned nil).
//   - ctx ended: ctx's error, from the campaign or the pause between
//     campaigns; or, if fn was running, whatever fn returned (a fn that
//     returns ctx.Err() makes it ctx's error).
//   - Client.Close: an error matching ErrClosed, from the campaign or, if
//     it cut fn short, from the ended lease (wrapping fn's error, if any);
//     OnLost runs first in that case.
//   - fn panicked: the lease is released on the way out, within the cleanup
//     timeout, and the panic goes on; OnLost does not run.
//
// A loss or the hold limit (ErrLockLost, ErrHoldLimit) ends only one round:
// OnLost runs with it, and RunSingleton campaigns again (it returns that
// error if ctx has ended too).
//
// After a lease that ended sooner than a session timeout after it was
// granted, it pauses before campaigning again (100 ms, doubling up to the
// session timeout), so a connection that cannot keep a lease does not start
// and cancel fn in a hot loop.
//
// fn must stop promptly when its context is cancelled: zklock cancels it the
// moment the lease is lost or presumed lost, before any other process could
// be granted the lock, but it cannot stop a fn that ignores its context.
func (m *Mutex) RunSingleton(ctx context.Context, fn func(ctx context.Context) error, opts ...SingletonOption) error {
	var cfg singletonConfig
	for _, o := range opts {
		o(&cfg)
	}
	c := m.c
	var pause time.Duration
	for {
		a := c.exclusive(ctx, m.path, false)
		a.owner.Value = cfg.value
		l, err := opError("run-singleton", m.path)(c.acquire(ctx, a))
		if err != nil {
			return err
		}
		if cfg.onElected != nil {
			cfg.onElected(l)
		}
		err, ended := c.runHolding(ctx, l, fn)
		if !ended {
			return err // fn returned while it held the lock
		}
		if cfg.onLost != nil {
			cfg.onLost(err)
		}
		if errors.Is(err, ErrClosed) || ctx.Err() != nil {
			return err
		}
		c.log.Warn("zklock: singleton lost its lock; campaigning again", "path", m.path, "err", err)
		pause = nextPause(pause, time.Since(l.onNode().since), c.grantedTimeout())
		if err := c.sleep(ctx, pause); err != nil {
			return err
		}
	}
}

// Pauses between a singleton's campaigns: none after a lease that lasted a
// session timeout, else doubling from pauseFirst up to the session timeout,
// so that a lease that ends at once (a connection that cannot hold one) does
// not start and cancel fn in a hot loop.
const pauseFirst = 100 * time.Millisecond

func nextPause(last, held, session time.Duration) time.Duration {
	switch {
	case held >= session:
		return 0
	case last == 0:
		return pauseFirst
	}
	return min(2*last, session)
}

// sleep waits d, or until ctx ends or the client closes.
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return c.ctxErr(ctx)
	case <-c.closing:
		return ErrClosed
	}
}
