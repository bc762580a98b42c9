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
	// waits for (a holder, or a waiter ahead), once for each such context.
	WaitingFor(traceparent string)
	// Granted ends the acquisition with the lease's node and its fencing
	// token (0 when not known yet) and begins the hold.
	Granted(node string, token int64) HoldSpan
	// Failed ends an acquisition that returned err.
	Failed(err error)
}

// HoldSpan is one lease being held.
type HoldSpan interface {
	// Ended reports the lease's end: ErrReleased, ErrClosed, ErrHoldLimit,
	// or an error matching ErrLockLost.
	Ended(why error)
}
