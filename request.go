package zklock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
)

// This file holds how one ZooKeeper request is run, awaited, classified and
// retried. Every retry in the package goes through retrier.

// errKind says what a request's error means for the session and the request.
type errKind int

const (
	errNone       errKind = iota
	errConnection         // the connection dropped: the session may live on, the request may be sent again
	errSession            // the session is over (expired, or closed on purpose): its ephemeral nodes are gone
	errRefused            // the server answered with an error: sending it again gives the same answer
	errStop               // not ZooKeeper's: the caller's ctx ended or the client closed
)

// classify sorts an error from go-zookeeper. go-zookeeper does not normalise
// network errors: a reset while a request is written comes back raw
// ("connection reset by peer", "broken pipe"), not as ErrConnectionClosed.
func classify(err error) errKind {
	switch {
	case err == nil:
		return errNone
	case stopped(err): // before net.Error: context.DeadlineExceeded is one
		return errStop
	case errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrClosing):
		return errSession
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrSessionMoved), errors.Is(err, zk.ErrNoServer),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, os.ErrDeadlineExceeded),
		isNetError(err):
		return errConnection
	default:
		return errRefused
	}
}

// isNetError reports a raw network error. It is a function of its own so
// that the targets of errors.As, which escape, are allocated only for errors.
func isNetError(err error) bool {
	var netErr net.Error
	var errno syscall.Errno
	return errors.As(err, &netErr) || errors.As(err, &errno)
}

// Back-off between retries: go-zookeeper queues requests while it reconnects,
// so a retry only spins when the connection is gone for good; the back-off
// bounds that case, and the exits in wait end it.
const (
	retryFirst = 10 * time.Millisecond
	retryMax   = 500 * time.Millisecond
)

// retrier is the one retry policy: exponential back-off with jitter, ended by
// ctx, by the loss of the session the request belongs to (nil: any session),
// by Close, and by the connection ending for good.
type retrier struct {
	c      *Client
	ctx    context.Context
	sess   *session
	closed <-chan struct{} // Close began (callers), or closed the connection (cleanups)
	delay  backoff
}

// backoff spaces retries: the base doubles from retryFirst up to retryMax,
// and each wait is drawn from its upper half, so that clients cut off
// together do not come back in step.
type backoff time.Duration

// next moves the base on and returns the next wait.
func (b *backoff) next() time.Duration {
	d := min(max(2*time.Duration(*b), retryFirst), retryMax)
	*b = backoff(d)
	return d/2 + rand.N(d/2+1)
}

// retrier is the policy for a caller: it stops when Close begins.
func (c *Client) retrier(ctx context.Context, sess *session) *retrier {
	return &retrier{c: c, ctx: ctx, sess: sess, closed: c.closing}
}

// cleanupRetrier is the policy for removing what a caller left: it goes on
// during Close, until Close has closed the connection (the server then
// removes the session's nodes itself).
func (c *Client) cleanupRetrier(sess *session) *retrier {
	return &retrier{c: c, ctx: context.Background(), sess: sess, closed: c.connClosed}
}

// wait sleeps before the next attempt, or returns why there is none.
func (r *retrier) wait() error {
	r.c.opts.metrics.Retried()
	t := time.NewTimer(r.delay.next())
	defer t.Stop()
	var lost <-chan struct{}
	if r.sess != nil {
		lost = r.sess.lost
	}
	select {
	case <-t.C:
		return nil
	case <-lost:
		return errSessionOver
	case <-r.closed:
		return ErrClosed
	case <-r.c.session.ended:
		return errConnEnded
	case <-r.ctx.Done():
		// The last attempt failed for want of a connection.
		return fmt.Errorf("%w: %w", ErrUnreachable, ctxCause(r.ctx))
	}
}

// answerBound bounds a call that does not wait for a lock (TryAcquire,
// Contenders) by the session timeout as well as by ctx: if ZooKeeper has not
// answered by then, the session must be presumed lost anyway.
func (c *Client) answerBound(ctx context.Context) (context.Context, context.CancelFunc) {
	d := c.grantedTimeout()
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("%w: no answer within the session timeout %v", ErrUnreachable, d))
}

// grantedTimeout is the session timeout granted, as the loss clock knows it.
func (c *Client) grantedTimeout() time.Duration { return c.clock.granted() }

// begin is the start of every call of the client's that talks to ZooKeeper:
// it registers the call with Close (ErrClosed once the client is closing)
// and, when bound (a call that does not wait for a lock), bounds ctx by the
// session timeout as well (answerBound). The caller defers the scope's end,
// which undoes both:
//
//	ctx, scope, err := c.begin(ctx, true)
//	if err != nil {
//		return err
//	}
//	defer scope.end()
func (c *Client) begin(ctx context.Context, bound bool) (context.Context, callScope, error) {
	if !c.track() {
		return ctx, callScope{}, ErrClosed
	}
	s := callScope{c: c}
	if bound {
		ctx, s.cancel = c.answerBound(ctx)
	}
	return ctx, s, nil
}

// callScope is one call begun by Client.begin.
type callScope struct {
	c      *Client
	cancel context.CancelFunc // nil when not bound
}

// end releases the answer bound, then tells Close the call is over.
func (s callScope) end() {
	if s.cancel != nil {
		s.cancel()
	}
	s.c.wg.Done()
}

type result[T any] struct {
	v   T
	err error
}

// goCall runs fn (one ZooKeeper request) on its own goroutine, so the caller
// can stop waiting for it: go-zookeeper's requests take no context, and one
// queued during a disconnection waits for the reconnect. The caller must be
// tracked (c.track), which keeps Close waiting for fn too.
func goCall[T any](c *Client, fn func() (T, error)) <-chan result[T] {
	ch := make(chan result[T], 1)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		v, err := fn()
		ch <- result[T]{v, err}
	}()
	return ch
}

// await waits for a goCall result, the caller's ctx, or Close.
func await[T any](ctx context.Context, c *Client, ch <-chan result[T]) (T, error) {
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, c.ctxErr(ctx)
	case <-c.closing:
		var zero T
		return zero, ErrClosed
	}
}

// call runs fn under ctx: goCall then await.
func call[T any](ctx context.Context, c *Client, fn func() (T, error)) (T, error) {
	return await(ctx, c, goCall(c, fn))
}

// ctxErr is why ctx ended, as zklock returns it. A ctx that ended while
// the client was out of contact with ZooKeeper ended for want of ZooKeeper,
// not of the lock: the error then matches ErrUnreachable as well, so an
// outage never reads as contention. Every wait ctx can end reports it so.
func (c *Client) ctxErr(ctx context.Context) error {
	if c.outOfContact() {
		return fmt.Errorf("%w: %w", ErrUnreachable, ctxCause(ctx))
	}
	return fmt.Errorf("zklock: %w", ctxCause(ctx))
}

// outOfContact reports that the client has no working connection now: the
// connection has no session (dropped, reconnecting, refused), or, where the
// wire sees replies, nothing sent in the last half of the granted session
// timeout was answered, though a live connection pings every third of it.
func (c *Client) outOfContact() bool {
	if c.conn.State() != zk.StateHasSession {
		return true
	}
	if c.wire == nil {
		return false
	}
	contact, granted := c.wire.LastContact()
	return granted > 0 && time.Since(contact) > granted/2
}

// stopped reports an error that means the caller must stop: its ctx ended or
// the client closed. Such errors come from await and retrier, never from
// ZooKeeper.
func stopped(err error) bool {
	return errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
