package zklockotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/zklock/zklock"
)

// Tracer turns what zklock reports of each acquisition and lease
// (zklock.Tracer) into OpenTelemetry spans:
//
//	zklock.acquire  from the call to its return: zklock.kind, zklock.path,
//	                zklock.queue.length, zklock.outcome (granted, locked,
//	                unreachable, timeout or error), zklock.token; a link to
//	                each node it waited for (attribute zklock.waited_for),
//	                so a trace shows who made whom wait
//	zklock.hold     from the grant to the lease's end, a child of the
//	                caller's span: zklock.token, zklock.node, zklock.end
//	                (released, closed, hold_limit, or a loss cause)
//
// The acquisition's trace context is recorded in its lock node, which is
// how a waiter on another host links to it:
//
//	tr := zklockotel.NewTracer(otel.Tracer("github.com/zklock/zklock"))
//	c, err := zklock.Connect(ctx, servers, zklock.WithTracer(tr))
type Tracer struct{ t trace.Tracer }

// NewTracer returns a zklock.Tracer that makes its spans with t.
func NewTracer(t trace.Tracer) *Tracer { return &Tracer{t} }

var _ zklock.Tracer = (*Tracer)(nil)

// StartAcquire implements zklock.Tracer.
func (t *Tracer) StartAcquire(ctx context.Context, kind, path string) zklock.AcquireSpan {
	actx, span := t.t.Start(ctx, "zklock.acquire", trace.WithAttributes(
		attribute.String("zklock.kind", kind), attribute.String("zklock.path", path)))
	return &acquireSpan{t: t.t, parent: ctx, ctx: actx, span: span}
}

type acquireSpan struct {
	t      trace.Tracer
	parent context.Context // the caller's: the hold is its child
	ctx    context.Context
	span   trace.Span
}

func (a *acquireSpan) Context() string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(a.ctx, carrier)
	return carrier.Get("traceparent")
}

func (a *acquireSpan) Queued(length int) {
	a.span.SetAttributes(attribute.Int("zklock.queue.length", length))
}

func (a *acquireSpan) WaitingFor(traceparent string) {
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		a.span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.Bool("zklock.waited_for", true)}})
	}
}

func (a *acquireSpan) Granted(node string, token int64) zklock.HoldSpan {
	a.span.SetAttributes(attribute.String("zklock.outcome", "granted"), attribute.Int64("zklock.token", token))
	a.span.End()
	_, hold := a.t.Start(a.parent, "zklock.hold", trace.WithAttributes(
		attribute.Int64("zklock.token", token), attribute.String("zklock.node", node)),
		trace.WithLinks(trace.Link{SpanContext: a.span.SpanContext()}))
	return holdSpan{hold}
}

func (a *acquireSpan) Failed(err error) {
	a.span.SetAttributes(attribute.String("zklock.outcome", zklock.AcquireOutcome(err)))
	if !errors.Is(err, zklock.ErrLocked) {
		a.span.RecordError(err)
		a.span.SetStatus(codes.Error, err.Error())
	}
	a.span.End()
}

type holdSpan struct{ span trace.Span }

func (h holdSpan) Ended(why error) {
	end := "released"
	switch {
	case errors.Is(why, zklock.ErrReleased):
	case errors.Is(why, zklock.ErrClosed):
		end = "closed"
	case errors.Is(why, zklock.ErrHoldLimit):
		end = "hold_limit"
	default:
		if end = zklock.LossCause(why); end == "" {
			end = "error"
		}
		h.span.SetStatus(codes.Error, why.Error())
	}
	h.span.SetAttributes(attribute.String("zklock.end", end))
	h.span.End()
}
