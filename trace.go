package zklock

import "context"

// Tracer follows each acquisition and the lease it yields, for a tracing
// system (the module github.com/zklock/zklock/metrics/zklockotel adapts it
// to OpenTelemetry spans; zklock itself depends on no tracing library). Set
// it with WithTracer. Its methods, and those of the spans it returns, are
// called synchronously, some under a lease's internal lock: they must
// return quickly, must not block, and must not call back into zklock.
type Tracer interface {
	// StartAcquire begins the trace of one acquisition of path by a
	// primitive of kind (KindMutex, ...), under the caller's ctx.
	StartAcquire(ctx context.Context, kind, path string) AcquireSpan
}

// AcquireSpan is one acquisition being traced.
type AcquireSpan interface {
	// Context is the span's trace context as a W3C traceparent, recorded in
	// the lock node (Owner.Trace) so that a waiter behind it can name
	// whom it waited for; "" records none.
	Context() string
	// Queued reports the length of the queue the acquisition joined, its
	// own node included.
	Queued(length int)
	// WaitingFor reports the trace context recorded in the node it now
	// waits for (a holder, or a waiter ahead), once per node waited for.
	WaitingFor(traceparent string)
	// Granted ends the acquisition with the lease and its fencing token (0
	// when not known yet) and begins the hold.
	Granted(l *Lease, token int64) HoldSpan
	// Failed ends an acquisition that returned err.
	Failed(err error)
}

// HoldSpan is one lease being held.
type HoldSpan interface {
	// Ended reports the lease's end: ErrReleased, ErrClosed, ErrHoldLimit,
	// or an error matching ErrLockLost.
	Ended(why error)
}

// WithTracer has every acquisition and lease of the client traced by t
// (none by default). A semaphore's turnstile, held only for a moment, is
// not traced.
func WithTracer(t Tracer) Option {
	return func(o *options) error {
		o.tracer = t
		return nil
	}
}

// startTrace begins a's trace, if the client traces, and records its
// context in the node's owner record.
func (c *Client) startTrace(ctx context.Context, a *ask) {
	if c.opts.tracer == nil || a.policy.brief() {
		return
	}
	a.trace = c.opts.tracer.StartAcquire(ctx, a.style.Kind, a.path)
	a.owner.Trace = a.trace.Context()
}

// endTrace ends a's trace with the acquisition's outcome.
func (a *ask) endTrace(l *Lease, err error) {
	switch {
	case a.trace == nil:
	case err != nil:
		a.trace.Failed(err)
	default:
		l.traceHold(a.trace.Granted(l, l.q.knownToken()))
	}
}

// traceHold gives the lease its hold span; a lease that ended already (lost
// between the grant and now) ends the span at once.
func (l *Lease) traceHold(h HoldSpan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == leaseEnded {
		h.Ended(l.err)
		return
	}
	l.hold = h
}

// waitingFor tells q's trace whom q waits for, from that node's data.
func (q *queueNode) waitingFor(data []byte) {
	if q.trace == nil {
		return
	}
	if o, ok := parseOwner(data); ok && o.Trace != "" {
		q.trace.WaitingFor(o.Trace)
	}
}

// knownToken is the fencing token if known without a request: off the
// create's reply, or from the own-node read if it has finished; else 0.
func (q *queueNode) knownToken() int64 {
	if q.createZxid != 0 {
		return q.createZxid
	}
	if isDone(q.fetched) && q.fetchErr == nil {
		return q.czxid
	}
	return 0
}
